/**
 * A local OpenID Connect provider for trying provider sign-in in a browser (docs/providers.md, "Try it: sign in
 * with a local OpenID Connect provider"). `npm run oidc-dev` starts oidc-provider on
 * http://localhost:9000 with one client registered for a Gatehouse at http://localhost:3000, and a login
 * page that accepts any name: `ada` signs in as ada@example.com (an address the provider vouches for).
 * For development only: keys and sessions live in memory and vanish when it stops.
 */
import { createServer } from 'node:http';
import Provider from 'oidc-provider';

export const DEV_CLIENT = { client_id: 'gatehouse-dev', client_secret: 'gatehouse-dev-secret' };

export interface DevProvider {
  issuer: string;
  close(): Promise<void>;
}

/** Starts the provider; `gatehouse` is the SERVER_URL of the Gatehouse it serves. */
export async function startDevProvider(
  opts: { port?: number; host?: string; gatehouse?: string } = {},
): Promise<DevProvider> {
  const port = opts.port ?? 9000;
  const host = opts.host ?? 'localhost';
  const gatehouse = (opts.gatehouse ?? 'http://localhost:3000').replace(/\/+$/, '');
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host === 'localhost' ? '127.0.0.1' : host, resolve);
  });
  const actualPort = (server.address() as { port: number }).port;
  const issuer = `http://${host}:${actualPort}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        ...DEV_CLIENT,
        redirect_uris: [`${gatehouse}/auth/providers/oidc/callback`],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    // The built-in login and consent pages: any login name signs in.
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['gatehouse-dev-provider-cookie-key'] },
    async findAccount(_ctx: unknown, id: string) {
      const name = id.replace(/@.*$/, '');
      return {
        accountId: id,
        claims: async () => ({
          sub: id,
          email: id.includes('@') ? id : `${id}@example.com`,
          email_verified: true,
          name: name.charAt(0).toUpperCase() + name.slice(1),
        }),
      };
    },
  });
  server.on('request', provider.callback());
  return {
    issuer,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dev = await startDevProvider({ port: Number(process.env.OIDC_DEV_PORT ?? 9000) });
  process.stdout.write(
    [
      `Local OpenID Connect provider at ${dev.issuer}`,
      '',
      'Start Gatehouse beside it with:',
      `  OIDC_ENABLED=true OIDC_ISSUER=${dev.issuer} OIDC_CLIENT_ID=${DEV_CLIENT.client_id} \\`,
      `  OIDC_CLIENT_SECRET=${DEV_CLIENT.client_secret} npm start`,
      '',
      'then open http://localhost:3000/auth/providers/oidc and sign in with any name.',
      'Ctrl-C stops the provider.',
      '',
    ].join('\n'),
  );
  const stop = () => void dev.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
