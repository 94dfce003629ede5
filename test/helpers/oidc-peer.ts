/**
 * A real OpenID Provider in the test process: oidc-provider (a certified implementation) on a local
 * port, with its own signing key so that tests can also hand the relying party tokens it did not make
 * (wrong audience, issuer, expiry, nonce or key). Interactions are answered by the test: the next sign-in
 * logs in whichever account the test names, and consents to what the client asked.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';
import Provider from 'oidc-provider';

export interface PeerAccount {
  sub: string;
  email?: string;
  email_verified?: boolean | string;
  name?: string;
  picture?: string;
  hd?: string;
}

export interface PeerClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
  token_endpoint_auth_method?: string;
  response_types?: string[];
}

/** Changes an ID token on its way out of the token endpoint (the claims, or the key that signs it). */
export type IdTokenTamper = (claims: JWTPayload) => { claims: JWTPayload; key?: 'peer' | 'stranger' };

export interface OidcPeer {
  issuer: string;
  /** The account the next sign-in at this peer logs in as. */
  signInAs(account: PeerAccount): void;
  /** Applied to the next ID token only. */
  tamperNextIdToken(fn: IdTokenTamper): void;
  /** Requests the relying party made, by path (`/token`, `/me`…), for assertions. */
  requests: { method: string; path: string; body?: string }[];
  /** Rewrites a token request's body before the provider sees it (Apple's client-secret JWT check). */
  beforeToken?: (body: URLSearchParams) => Promise<URLSearchParams>;
  /** Answers the key-set requests (`/jwks`) with this instead, while set (a provider having trouble). */
  brokenKeySet?: { status: number; body: string };
  close(): Promise<void>;
}

/** Starts a peer on 127.0.0.1. */
export async function startOidcPeer(opts: {
  clients: PeerClient[];
  /** Put the claims of the granted scopes in the ID token too (Apple has no userinfo endpoint). */
  claimsInIdToken?: boolean;
}): Promise<OidcPeer> {
  const accounts = new Map<string, PeerAccount>();
  let next: PeerAccount | undefined;
  let tamper: IdTokenTamper | undefined;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const stranger = await generateKeyPair('RS256');
  const jwk: JWK = { ...(await exportJWK(privateKey)), kid: 'peer-key', alg: 'RS256', use: 'sig' };

  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: opts.clients.map((c) => ({
      grant_types: ['authorization_code'],
      response_types: ['code'],
      ...c,
    })),
    jwks: { keys: [jwk] },
    conformIdTokenClaims: !opts.claimsInIdToken,
    cookies: { keys: ['peer-cookie-key-0123456789abcdef'] },
    pkce: { required: () => false },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'picture', 'hd'] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx: unknown, sub: string) {
      const account = accounts.get(sub);
      if (!account) return undefined;
      return { accountId: sub, claims: async () => ({ ...account }) };
    },
    // Each test uses a new browser, so every sign-in asks who logs in.
    ttl: {
      Session: 600,
      Interaction: 600,
      AuthorizationCode: 60,
      AccessToken: 600,
      Grant: 600,
      IdToken: 600,
    },
    // Errors as plain text, so that a failing test shows why the peer refused.
    async renderError(ctx: { type: string; body: string }, out: Record<string, string>) {
      ctx.type = 'text/plain';
      ctx.body = `peer error: ${out.error}: ${out.error_description}`;
    },
  });
  const handle = provider.callback();
  const peer: OidcPeer = {
    issuer,
    signInAs(account) {
      accounts.set(account.sub, account);
      next = account;
    },
    tamperNextIdToken(fn) {
      tamper = fn;
    },
    requests: [],
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };

  async function interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      if (!next) throw new Error('the test did not say who signs in at the peer');
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: next.sub } },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    const grant = new provider.Grant({
      accountId: details.session?.accountId as string,
      clientId: String(details.params.client_id),
    });
    grant.addOIDCScope(String(details.params.scope));
    await provider.interactionFinished(
      req,
      res,
      { consent: { grantId: await grant.save() } },
      { mergeWithLastSubmission: true },
    );
  }

  /** Lets the token response through, changing its ID token when the test asked. */
  function tamperingResponse(res: ServerResponse): void {
    if (!tamper) return;
    const fn = tamper;
    tamper = undefined;
    const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
    (res as unknown as { end: (chunk?: unknown) => void }).end = (chunk?: unknown) => {
      const text = Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk ?? '');
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text);
      } catch {
        end(chunk);
        return;
      }
      if (typeof body.id_token !== 'string') {
        end(chunk);
        return;
      }
      const { claims, key } = fn(decodeJwt(body.id_token));
      const signer = key === 'stranger' ? stranger.privateKey : privateKey;
      void new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'peer-key' })
        .sign(signer)
        .then((token) => {
          const out = JSON.stringify({ ...body, id_token: token });
          res.setHeader('content-length', Buffer.byteLength(out));
          end(out);
        });
    };
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0] as string;
    void (async () => {
      try {
        if (path.startsWith('/interaction/')) {
          peer.requests.push({ method: req.method ?? 'GET', path: '/interaction' });
          await interaction(req, res);
          return;
        }
        if (path === '/jwks' && peer.brokenKeySet) {
          peer.requests.push({ method: req.method ?? 'GET', path });
          res.statusCode = peer.brokenKeySet.status;
          res.setHeader('content-type', 'application/json');
          res.end(peer.brokenKeySet.body);
          return;
        }
        if (path === '/token' && req.method === 'POST') {
          const chunks: Buffer[] = [];
          for await (const c of req) chunks.push(c as Buffer);
          let body = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
          if (peer.beforeToken) body = await peer.beforeToken(body);
          peer.requests.push({ method: 'POST', path, body: body.toString() });
          (req as IncomingMessage & { body?: string }).body = body.toString();
          tamperingResponse(res);
        } else {
          peer.requests.push({ method: req.method ?? 'GET', path });
        }
        handle(req, res);
      } catch (err) {
        res.statusCode = 500;
        res.end(String((err as Error).message));
      }
    })();
  });
  return peer;
}
