/**
 * A small MCP server protected by Gatehouse (docs/mcp.md). It is a resource server in OAuth terms:
 *
 * - it publishes its protected-resource metadata (RFC 9728) naming Gatehouse as its authorization server;
 * - a request without a valid token gets `401` with `WWW-Authenticate: Bearer resource_metadata="…"`, from
 *   which an MCP client discovers Gatehouse and signs the person in;
 * - a token is accepted only when Gatehouse signed it (its JWKS), for this server (`aud` is this server's
 *   URL: a token minted for another MCP server is refused here), and it is an access token (`typ: at+jwt`).
 *
 * Run it: GATEHOUSE_URL=http://localhost:3000 MCP_URL=http://localhost:4000/mcp PORT=4000 \
 *   node --import tsx examples/mcp-server/server.ts
 * and add MCP_URL to Gatehouse's OAUTH_RESOURCES.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';

export interface McpExampleOptions {
  /** Gatehouse's SERVER_URL (the issuer of the tokens). */
  gatehouseUrl: string;
  /** This server's MCP endpoint as clients reach it: the `resource`, and the audience its tokens must name. */
  mcpUrl: string;
  port?: number;
  host?: string;
}

/** What a verified token says, as the tools see it. */
interface Caller {
  sub: string;
  scope: string;
  clientId: string;
}

function verifier(opts: McpExampleOptions) {
  const issuer = opts.gatehouseUrl.replace(/\/+$/, '');
  const jwks = createRemoteJWKSet(new URL(`${issuer}/auth/jwks`));
  return async (token: string): Promise<Caller> => {
    const { payload } = await jwtVerify<JWTPayload & { scope?: string; client_id?: string }>(token, jwks, {
      issuer,
      audience: opts.mcpUrl,
      typ: 'at+jwt',
    });
    return { sub: String(payload.sub), scope: payload.scope ?? '', clientId: payload.client_id ?? '' };
  };
}

/** The MCP server of one request (stateless mode: a fresh server and transport per request). */
function mcpFor(caller: Caller): McpServer {
  const server = new McpServer({ name: 'gatehouse-example', version: '1.0.0' });
  server.registerTool(
    'whoami',
    { description: 'Who the signed-in person is, as Gatehouse vouched for them' },
    async () => ({
      content: [
        {
          type: 'text',
          text: JSON.stringify({ sub: caller.sub, scope: caller.scope, client_id: caller.clientId }),
        },
      ],
    }),
  );
  return server;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 1024 * 1024) throw new Error('body too large');
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

export async function startMcpExample(
  opts: McpExampleOptions,
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const verify = verifier(opts);
  const mcp = new URL(opts.mcpUrl);
  // RFC 9728 §3.1: the metadata of a resource with a path lives at the well-known path plus that path.
  const metadataPath = `/.well-known/oauth-protected-resource${mcp.pathname === '/' ? '' : mcp.pathname}`;
  const metadataUrl = `${mcp.origin}${metadataPath}`;
  const metadata = {
    resource: opts.mcpUrl,
    authorization_servers: [opts.gatehouseUrl.replace(/\/+$/, '')],
    bearer_methods_supported: ['header'],
    scopes_supported: ['openid', 'profile'],
    resource_name: 'Gatehouse example MCP server',
  };
  const challenge = (res: ServerResponse, error?: string) => {
    res.writeHead(401, {
      'content-type': 'application/json',
      'www-authenticate': `Bearer resource_metadata="${metadataUrl}"${error ? `, error="${error}"` : ''}`,
    });
    res.end(
      JSON.stringify({
        error: error ?? 'unauthorized',
        error_description: 'a Gatehouse access token for this server is required',
      }),
    );
  };

  const server = createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? '/').split('?')[0];
      if (
        req.method === 'GET' &&
        (path === metadataPath || path === '/.well-known/oauth-protected-resource')
      ) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(metadata));
        return;
      }
      if (path !== mcp.pathname) {
        res.writeHead(404).end();
        return;
      }
      const m = /^Bearer +(\S+)$/i.exec(req.headers.authorization ?? '');
      if (!m) return challenge(res);
      let caller: Caller;
      try {
        caller = await verify(m[1] as string);
      } catch {
        return challenge(res, 'invalid_token');
      }
      const body = req.method === 'POST' ? await readJson(req) : undefined;
      const server = mcpFor(caller);
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'bad_request' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? '127.0.0.1'}:${port}`,
    server,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const gatehouseUrl = process.env['GATEHOUSE_URL'] ?? 'http://localhost:3000';
  const port = Number(process.env['PORT'] ?? 4000);
  const mcpUrl = process.env['MCP_URL'] ?? `http://localhost:${port}/mcp`;
  const s = await startMcpExample({ gatehouseUrl, mcpUrl, port, host: process.env['HOST'] ?? '127.0.0.1' });
  console.log(`MCP example listening on ${s.url}; resource ${mcpUrl}; tokens from ${gatehouseUrl}`);
}
