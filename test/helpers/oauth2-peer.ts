/**
 * A small OAuth 2.0 authorization server (RFC 6749 §4.1 with PKCE, RFC 7636) in the test process, for
 * the providers reached through endpoint settings (GitHub, Facebook, Windows Live, Spotify). It checks
 * what a real one checks: the client and its registered redirect URI, the client's authentication
 * (Basic or in the body, as registered), codes that are single use and short-lived, and the PKCE
 * verifier against the challenge. The person who signs in and the profile JSON are the test's.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PeerUser {
  id: string;
  [k: string]: unknown;
}

export interface OAuth2PeerOptions {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  /** How the client must authenticate at the token endpoint. */
  clientAuth: 'basic' | 'post';
  /** The profile document of a user (the provider's own shape). */
  profile: (user: PeerUser) => unknown;
  /** GitHub's /user/emails list, when the provider has one. */
  emails?: (user: PeerUser) => unknown;
  /** GitHub answers token errors with 200 and form-encoded bodies unless asked for JSON. */
  githubStyle?: boolean;
  /** Refuse authorization requests without an S256 code challenge. */
  requirePkce?: boolean;
}

interface Code {
  user: PeerUser;
  redirectUri: string;
  challenge?: string;
  expiresAt: number;
  used: boolean;
}

export interface OAuth2Peer {
  base: string;
  authorizationUrl: string;
  tokenUrl: string;
  profileUrl: string;
  signInAs(user: PeerUser): void;
  /** The next authorization is refused (the person cancels). */
  denyNext(): void;
  /** Authorization requests received, as URLs. */
  authorizations: URL[];
  /** Token requests: their form fields and whether the client used Basic. */
  tokenRequests: { fields: Record<string, string>; basic: boolean; status: number }[];
  close(): Promise<void>;
}

const b64url = (b: Buffer) => b.toString('base64url');

export async function startOAuth2Peer(opts: OAuth2PeerOptions): Promise<OAuth2Peer> {
  const codes = new Map<string, Code>();
  const tokens = new Map<string, PeerUser>();
  let next: PeerUser | undefined;
  let deny = false;
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const peer: OAuth2Peer = {
    base,
    authorizationUrl: `${base}/authorize`,
    tokenUrl: `${base}/token`,
    profileUrl: `${base}/user`,
    signInAs(user) {
      next = user;
    },
    denyNext() {
      deny = true;
    },
    authorizations: [],
    tokenRequests: [],
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };

  const send = (res: ServerResponse, status: number, body: unknown, form = false) => {
    const text = form ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body);
    res.writeHead(status, {
      'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json',
      'cache-control': 'no-store',
    });
    res.end(text);
  };

  function authorize(url: URL, res: ServerResponse): void {
    peer.authorizations.push(url);
    const q = url.searchParams;
    // RFC 6749 §4.1.2.1: a bad client or redirect URI is shown to the person, never redirected to.
    if (q.get('client_id') !== opts.clientId || q.get('redirect_uri') !== opts.redirectUri) {
      send(res, 400, { error: 'invalid_request' });
      return;
    }
    const back = new URL(opts.redirectUri);
    const state = q.get('state');
    if (state !== null) back.searchParams.set('state', state);
    const challenge = q.get('code_challenge') ?? undefined;
    const refuse = (error: string) => {
      back.searchParams.set('error', error);
      res.writeHead(302, { location: back.toString() }).end();
    };
    if (q.get('response_type') !== 'code') {
      refuse('unsupported_response_type');
      return;
    }
    if (challenge !== undefined && q.get('code_challenge_method') !== 'S256') {
      refuse('invalid_request');
      return;
    }
    if (opts.requirePkce && challenge === undefined) {
      refuse('invalid_request');
      return;
    }
    if (deny || !next) {
      deny = false;
      refuse('access_denied');
      return;
    }
    const code = b64url(randomBytes(24));
    codes.set(code, {
      user: next,
      redirectUri: opts.redirectUri,
      challenge,
      expiresAt: Date.now() + 60_000,
      used: false,
    });
    back.searchParams.set('code', code);
    res.writeHead(302, { location: back.toString() }).end();
  }

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const fields = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
    const auth = req.headers.authorization;
    const basic = auth?.startsWith('Basic ') ?? false;
    const json = opts.githubStyle ? (req.headers.accept ?? '').includes('application/json') : true;
    const fail = (status: number, error: string) => {
      peer.tokenRequests.push({ fields, basic, status: opts.githubStyle ? 200 : status });
      send(res, opts.githubStyle ? 200 : status, { error }, !json);
    };
    let id: string | undefined;
    let secret: string | undefined;
    if (basic) {
      const [u = '', p = ''] = Buffer.from((auth as string).slice(6), 'base64')
        .toString('utf8')
        .split(':');
      id = decodeURIComponent(u.replace(/\+/g, ' '));
      secret = decodeURIComponent(p.replace(/\+/g, ' '));
    } else {
      id = fields.client_id;
      secret = fields.client_secret;
    }
    if ((opts.clientAuth === 'basic') !== basic || id !== opts.clientId || secret !== opts.clientSecret)
      return fail(401, 'invalid_client');
    if (fields.grant_type !== 'authorization_code') return fail(400, 'unsupported_grant_type');
    const code = codes.get(fields.code ?? '');
    if (!code || code.used || code.expiresAt < Date.now() || code.redirectUri !== fields.redirect_uri)
      return fail(400, 'invalid_grant');
    code.used = true;
    if (code.challenge !== undefined) {
      const verifier = fields.code_verifier ?? '';
      const computed = b64url(createHash('sha256').update(verifier).digest());
      if (computed !== code.challenge) return fail(400, 'invalid_grant');
    } else if (fields.code_verifier !== undefined) return fail(400, 'invalid_grant');
    const access = b64url(randomBytes(24));
    tokens.set(access, code.user);
    peer.tokenRequests.push({ fields, basic, status: 200 });
    send(
      res,
      200,
      {
        access_token: access,
        token_type: 'bearer',
        scope: 'read',
        refresh_token: `r-${access}`,
        expires_in: '3600',
      },
      !json,
    );
  }

  function resource(req: IncomingMessage, res: ServerResponse, make: (u: PeerUser) => unknown): void {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    const user = m ? tokens.get(m[1] as string) : undefined;
    if (user) send(res, 200, make(user));
    else send(res, 401, { message: 'Bad credentials' });
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', base);
    void (async () => {
      if (url.pathname === '/authorize' && req.method === 'GET') return authorize(url, res);
      if (url.pathname === '/token' && req.method === 'POST') return token(req, res);
      if (url.pathname === '/user' && req.method === 'GET') return resource(req, res, opts.profile);
      if (url.pathname === '/user/emails' && req.method === 'GET' && opts.emails)
        return resource(req, res, opts.emails);
      send(res, 404, { error: 'not_found' });
    })().catch((err) => {
      res.statusCode = 500;
      res.end(String(err));
    });
  });
  return peer;
}
