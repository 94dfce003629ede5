/**
 * An OAuth 1.0a service provider (RFC 5849) in the test process, standing in for Twitter. The signature
 * of every request is checked by passport-http-oauth's strategies (an implementation independent of the
 * service's signing code), with the consumer secret and, after the first step, the token secret; the
 * request-token and access-token answers come from oauthorize. The person's approval page is the test's:
 * it approves for the user the test names, or refuses. Requiring passport-http-oauth adds passport's
 * login helpers to http.IncomingMessage in this test process.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import oauthorize from 'oauthorize';
import { ConsumerStrategy, TokenStrategy } from 'passport-http-oauth';

export interface TwitterUser {
  id_str: string;
  name?: string;
  screen_name?: string;
  email?: string;
  profile_image_url_https?: string;
}

export interface OAuth1Peer {
  requestTokenUrl: string;
  authorizationUrl: string;
  accessTokenUrl: string;
  profileUrl: string;
  signInAs(user: TwitterUser): void;
  denyNext(): void;
  /** Requests refused for a bad signature or an unknown token, by path. */
  refusals: string[];
  close(): Promise<void>;
}

interface RequestToken {
  secret: string;
  callbackURL: string;
  verifier?: string;
  user?: TwitterUser;
  used: boolean;
}

const rand = () => randomBytes(18).toString('base64url');

export async function startOAuth1Peer(opts: {
  consumerKey: string;
  consumerSecret: string;
}): Promise<OAuth1Peer> {
  const requestTokens = new Map<string, RequestToken>();
  const accessTokens = new Map<string, { secret: string; user: TwitterUser }>();
  const nonces = new Set<string>();
  let next: TwitterUser | undefined;
  let deny = false;
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const consumer = (key: string, done: (err: unknown, consumer?: unknown, secret?: string) => void) =>
    key === opts.consumerKey ? done(null, { key }, opts.consumerSecret) : done(null, false);
  // A nonce is accepted once, with a timestamp within five minutes.
  const validate = (timestamp: string, nonce: string, done: (err: unknown, ok: boolean) => void) => {
    const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) < 300;
    const unseen = !nonces.has(`${timestamp}:${nonce}`);
    nonces.add(`${timestamp}:${nonce}`);
    done(null, fresh && unseen);
  };
  const consumerStrategy = new ConsumerStrategy(
    { host: new URL(base).host },
    consumer,
    (token: string, done: (err: unknown, secret?: string | false, info?: unknown) => void) => {
      const t = requestTokens.get(token);
      return t && !t.used ? done(null, t.secret, { record: t }) : done(null, false);
    },
    validate,
  );
  const tokenStrategy = new TokenStrategy(
    { host: new URL(base).host },
    consumer,
    (token: string, done: (err: unknown, user?: unknown, secret?: string) => void) => {
      const t = accessTokens.get(token);
      return t ? done(null, t.user, t.secret) : done(null, false);
    },
    validate,
  );

  const peer: OAuth1Peer = {
    requestTokenUrl: `${base}/oauth/request_token`,
    authorizationUrl: `${base}/oauth/authenticate`,
    accessTokenUrl: `${base}/oauth/access_token`,
    profileUrl: `${base}/1.1/account/verify_credentials.json?include_email=true&skip_status=true`,
    signInAs(user) {
      next = user;
    },
    denyNext() {
      deny = true;
    },
    refusals: [],
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };

  type Req = IncomingMessage & {
    query: Record<string, string>;
    body: Record<string, string>;
    user?: unknown;
    authInfo?: unknown;
  };

  /** Runs a passport strategy on the request, as passport's middleware would. */
  function authenticate(strategy: object, req: Req): Promise<{ user: unknown; info: unknown } | undefined> {
    return new Promise((resolve, reject) => {
      const s = Object.create(strategy) as Record<string, unknown> & { authenticate(req: unknown): void };
      s.success = (user: unknown, info: unknown) => resolve({ user, info });
      s.fail = () => resolve(undefined);
      s.error = (err: unknown) => reject(err);
      s.authenticate(req);
    });
  }

  const run = (
    mw: (req: unknown, res: unknown, next: (err?: unknown) => void) => void,
    req: Req,
    res: ServerResponse,
  ) =>
    new Promise<void>((resolve, reject) =>
      mw(req, res, (err) => {
        if (err) reject(err);
        else resolve();
      }),
    );

  // oauthorize picks a call form by the functions' arity, so each takes its parameters by name.
  const issueRequestToken = oauthorize.requestToken(
    (_consumer: unknown, callbackURL: string, done: (e: unknown, t?: string, s?: string) => void) => {
      const token = rand();
      const secret = rand();
      requestTokens.set(token, { secret, callbackURL, used: false });
      done(null, token, secret);
    },
  );
  const issueAccessToken = oauthorize.accessToken(
    (token: string, verifier: string, done: (e: unknown, ok: boolean) => void) => {
      const t = requestTokens.get(token);
      done(null, t !== undefined && t.verifier !== undefined && t.verifier === verifier);
    },
    (_consumer: unknown, token: string, done: (e: unknown, t?: string, s?: string, p?: unknown) => void) => {
      const t = requestTokens.get(token) as RequestToken;
      t.used = true;
      const access = rand();
      const secret = rand();
      accessTokens.set(access, { secret, user: t.user as TwitterUser });
      done(null, access, secret, { user_id: t.user?.id_str ?? '', screen_name: t.user?.screen_name ?? '' });
    },
  );

  server.on('request', (raw: IncomingMessage, res: ServerResponse) => {
    const req = raw as Req;
    const url = new URL(req.url ?? '/', base);
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      req.query = Object.fromEntries(url.searchParams);
      req.body = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
      const refuse = () => {
        peer.refusals.push(url.pathname);
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"errors":[{"code":32}]}');
      };
      if (url.pathname === '/oauth/request_token' && req.method === 'POST') {
        const ok = await authenticate(consumerStrategy, req);
        if (!ok) return refuse();
        req.user = ok.user;
        req.authInfo = ok.info;
        return run(issueRequestToken, req, res).catch(refuse);
      }
      if (url.pathname === '/oauth/authenticate' && req.method === 'GET') {
        const token = url.searchParams.get('oauth_token') ?? '';
        const t = requestTokens.get(token);
        if (!t) return refuse();
        const back = new URL(t.callbackURL);
        if (deny || !next) {
          deny = false;
          back.searchParams.set('denied', token);
        } else {
          t.user = next;
          t.verifier = rand();
          back.searchParams.set('oauth_token', token);
          back.searchParams.set('oauth_verifier', t.verifier);
        }
        res.writeHead(302, { location: back.toString() }).end();
        return;
      }
      if (url.pathname === '/oauth/access_token' && req.method === 'POST') {
        const ok = await authenticate(consumerStrategy, req);
        if (!ok) return refuse();
        req.user = ok.user;
        req.authInfo = ok.info;
        return run(issueAccessToken, req, res).catch(refuse);
      }
      if (url.pathname === '/1.1/account/verify_credentials.json' && req.method === 'GET') {
        const ok = await authenticate(tokenStrategy, req);
        if (!ok) return refuse();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ok.user));
        return;
      }
      res.writeHead(404).end();
    })().catch((err) => {
      res.writeHead(500).end(String(err));
    });
  });
  return peer;
}
