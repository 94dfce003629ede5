/**
 * `gatehouse oauth-clients`: OAuth clients an operator trusts, for the authorization server
 * (OAUTH_SERVER_ENABLED). Clients that name themselves by a metadata document URL (CIMD) need no entry.
 */
import { checkRedirectUris, createClient } from '../../auth/oauth-server/clients.ts';
import { removeClient } from '../../auth/oauth-server/grants.ts';
import { listClients } from '../../auth/oauth-server/store.ts';
import { type Command, configOf, parseOptions, subcommands, UsageError } from '../command.ts';
import { withDatabase } from '../database.ts';

const create = {
  summary: 'Register a client',
  help: `Usage: gatehouse oauth-clients create --name NAME --redirect-uri URI [--redirect-uri URI…] [--confidential]

Registers an OAuth client and prints its client_id (and, with --confidential, its client_secret, shown
this once: only its hash is kept).

  --name NAME          what the consent page calls the client
  --redirect-uri URI   a redirect URI, matched exactly (a loopback http URI matches any port); repeat
                       for several, or separate them with commas
  --confidential       the client keeps a secret (a server-side app; introspection needs one)
  --json               print {"client_id", "client_secret"} as JSON
`,
  async run(args: string[], io: Parameters<Command['run']>[1]): Promise<number> {
    const uris: string[] = [];
    const rest: string[] = [];
    for (let i = 0; i < args.length; i++) {
      const a = args[i] as string;
      if (a === '--redirect-uri') {
        const v = args[++i];
        if (v === undefined) throw new UsageError('--redirect-uri needs a value');
        uris.push(...v.split(','));
      } else if (a.startsWith('--redirect-uri=')) uris.push(...a.slice('--redirect-uri='.length).split(','));
      else rest.push(a);
    }
    const { values, flags } = parseOptions(rest, { values: ['name'], flags: ['confidential', 'json'] });
    const name = values.name?.trim();
    if (!name) throw new UsageError('give the client a --name');
    const config = configOf(io);
    const bad = checkRedirectUris(
      uris.map((u) => u.trim()).filter((u) => u !== ''),
      config.isProduction,
    );
    if (bad) throw new UsageError(bad);
    const made = await withDatabase(
      config,
      ({ db }) =>
        createClient(
          db,
          {
            name,
            redirectUris: uris.map((u) => u.trim()).filter((u) => u !== ''),
            confidential: flags.has('confidential'),
          },
          'operator',
        ),
      io,
    );
    if (flags.has('json'))
      io.out(`${JSON.stringify({ client_id: made.clientId, client_secret: made.clientSecret })}\n`);
    else {
      io.out(`client_id: ${made.clientId}\n`);
      if (made.clientSecret) io.out(`client_secret: ${made.clientSecret}\n`);
    }
    return 0;
  },
};

const list = {
  summary: 'List registered clients',
  help: `Usage: gatehouse oauth-clients list [--json]

Lists the clients made by this command and by dynamic registration (never their secrets).
`,
  async run(args: string[], io: Parameters<Command['run']>[1]): Promise<number> {
    const { flags } = parseOptions(args, { flags: ['json'] });
    const rows = await withDatabase(configOf(io), ({ db }) => listClients(db), io);
    const shown = rows.map((r) => ({
      client_id: r.id,
      name: r.name,
      type: r.secret_hash === null ? 'public' : 'confidential',
      origin: r.origin,
      redirect_uris: r.redirect_uris,
      created_at: new Date(r.created_at).toISOString(),
    }));
    if (flags.has('json')) io.out(`${JSON.stringify(shown, null, 2)}\n`);
    else
      for (const c of shown)
        io.out(`${c.client_id}  ${c.type.padEnd(12)}  ${c.name}  ${c.redirect_uris.join(' ')}\n`);
    return 0;
  },
};

const remove = {
  summary: 'Delete a client; its tokens stop working at once',
  help: `Usage: gatehouse oauth-clients delete <client_id>

Deletes the client, the consents people gave it and its refresh tokens; its access tokens are refused
from now on (the revoked list).
`,
  async run(args: string[], io: Parameters<Command['run']>[1]): Promise<number> {
    const [id, ...more] = args;
    if (id === undefined || id.startsWith('--')) throw new UsageError('give the client_id');
    if (more.length > 0) throw new UsageError(`unexpected argument "${more[0]}"`);
    const config = configOf(io);
    const found = await withDatabase(config, ({ db, clock }) => removeClient({ config, clock, db }, id), io);
    if (!found) {
      io.err(`no client has the id ${id}\n`);
      return 1;
    }
    io.out(`deleted ${id}\n`);
    return 0;
  },
};

const command: Command = {
  name: 'oauth-clients',
  summary: 'OAuth clients of the authorization server (create, list, delete)',
  help: 'Usage: gatehouse oauth-clients create|list|delete …',
  run: subcommands('oauth-clients', { create, list, delete: remove }),
};

export default command;
