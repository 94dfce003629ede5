/**
 * `gatehouse users`: accounts, for an operator. Each subcommand opens the service's database (migrating
 * it as the service would) and calls the functions the admin API calls (auth/operator.ts).
 */
import type { AccountListing } from '../../auth/accounts-store.ts';
import {
  checkNewPassword,
  createUser,
  disableUser,
  enableUser,
  findAccount,
  listUsers,
  resetLink,
  setUserRoles,
  signOutUser,
  userSessions,
} from '../../auth/operator.ts';
import { Passwords } from '../../auth/passwords.ts';
import { AppError } from '../../errors.ts';
import { parseQuota, setUserQuota, storageUsage } from '../../storage/quotas.ts';
import { type CliIO, type Command, configOf, parseOptions, subcommands, UsageError } from '../command.ts';
import { withDatabase } from '../database.ts';

/** Runs an operator action; its refusals (4xx errors of the catalogue) are one line on stderr and exit 1. */
async function operate(io: CliIO, fn: () => Promise<number>): Promise<number> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof AppError) || err.statusCode >= 500) throw err;
    io.err(`${err.message}\n`);
    return 1;
  }
}

/** The operands of `args` (words not starting with --), and the rest for parseOptions. */
function split(args: string[], valued: readonly string[]): { operands: string[]; options: string[] } {
  const operands: string[] = [];
  const options: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a.startsWith('--')) {
      options.push(a);
      const name = a.slice(2);
      if (valued.includes(name) && args[i + 1] !== undefined) options.push(args[++i] as string);
    } else operands.push(a);
  }
  return { operands, options };
}

function oneOperand(operands: string[], what: string): string {
  if (operands.length === 0) throw new UsageError(`give the ${what}`);
  if (operands.length > 1) throw new UsageError(`unexpected argument "${operands[1]}"`);
  return operands[0] as string;
}

const roleList = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(',')
        .map((r) => r.trim())
        .filter((r) => r !== '');

function readStdin(io: CliIO): string {
  return io.input().replace(/\r?\n$/, '');
}

const create = {
  summary: 'Create an account',
  help: `Usage: gatehouse users create <email> [--password PASSWORD | --password-stdin]
                             [--default-role ROLE] [--roles A,B] [--active]

Creates an account and its public.users row, as a registration does, and prints the user id (the
x-hasura-user-id of its tokens).

  --password PASSWORD   its password (seen by other users of this machine in the process list; prefer
                        --password-stdin). Checked as the routes check one: MIN_PASSWORD_LENGTH, and
                        the breach check when HIBP_ENABLED.
  --password-stdin      read the password from standard input (up to the end, one trailing newline
                        dropped). Without either, the account has no password (magic link, provider
                        sign-in, or a reset link from gatehouse users reset-link).
  --default-role ROLE   its default role (default DEFAULT_USER_ROLE); added to its roles when missing.
  --roles A,B           its roles (default DEFAULT_ALLOWED_USER_ROLES). --role is accepted too. The roles
                        must exist in auth.roles; ALLOWED_USER_ROLES does not limit an operator.
  --active              the account can sign in at once. Without it, it waits for activation like a
                        registration on a server without emails: gatehouse users enable activates it.`,
  async run(args: string[], io: CliIO) {
    const valued = ['password', 'default-role', 'roles', 'role'];
    const { operands, options } = split(args, valued);
    const email = oneOperand(operands, 'email address of the account');
    const { values, flags } = parseOptions(options, { values: valued, flags: ['password-stdin', 'active'] });
    if (values['password'] !== undefined && flags.has('password-stdin'))
      throw new UsageError('give --password or --password-stdin, not both');
    if (values['roles'] !== undefined && values['role'] !== undefined)
      throw new UsageError('give --roles or --role, not both');
    const password = flags.has('password-stdin') ? readStdin(io) : values['password'];
    const config = configOf(io);
    return operate(io, async () => {
      // Checked before the database is opened: a refused password leaves nothing behind.
      if (password !== undefined) await checkNewPassword({ config }, password);
      const passwords = password === undefined ? undefined : new Passwords(config);
      try {
        return await withDatabase(
          config,
          async (deps) => {
            const made = await createUser(
              { ...deps, passwords },
              {
                email,
                password,
                defaultRole: values['default-role'],
                roles: roleList(values['roles'] ?? values['role']),
                active: flags.has('active'),
              },
            );
            io.out(`${made.userId}\n`);
            io.err(
              `created ${email} (roles ${made.roles.join(', ')}; default ${made.defaultRole})${
                flags.has('active')
                  ? ''
                  : `; it waits for activation: gatehouse users enable ${email} lets it sign in`
              }\n`,
            );
            return 0;
          },
          io,
        );
      } finally {
        await passwords?.close();
      }
    });
  },
};

/** Every account, oldest first, read a page at a time as the admin API pages them. */
async function allAccounts(deps: Parameters<typeof listUsers>[0]): Promise<AccountListing[]> {
  const out: AccountListing[] = [];
  let cursor: string | undefined;
  do {
    const page = await listUsers(deps, { limit: 100, cursor });
    out.push(...page.users);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return out;
}

const list = {
  summary: 'List the accounts',
  help: `Usage: gatehouse users list [--json]

One line per account, oldest first: user id, email, state (active, pending activation, disabled),
default role and roles. --json prints an array of objects instead (user_id, account_id, email,
display_name, active, disabled_at, anonymous, mfa, default_role, roles, created_at).`,
  async run(args: string[], io: CliIO) {
    const { flags } = parseOptions(args, { flags: ['json'] });
    return withDatabase(
      configOf(io),
      async (deps) => {
        const accounts = await allAccounts(deps);
        if (flags.has('json')) {
          const out = accounts.map((a) => ({
            user_id: a.user_id,
            account_id: a.id,
            email: a.email,
            display_name: a.display_name,
            active: a.active,
            disabled_at: a.disabled_at?.toISOString() ?? null,
            anonymous: a.is_anonymous,
            mfa: a.mfa_enabled,
            default_role: a.default_role,
            roles: a.roles,
            created_at: a.created_at.toISOString(),
          }));
          io.out(`${JSON.stringify(out, null, 2)}\n`);
          return 0;
        }
        for (const a of accounts) {
          const state = a.disabled_at ? 'disabled' : a.active ? 'active' : 'pending';
          const who = a.email ?? (a.is_anonymous ? '(anonymous)' : '(no email)');
          io.out(
            `${a.user_id}  ${who}  ${state}${a.mfa_enabled ? ' mfa' : ''}  ${a.default_role} [${a.roles.join(',')}]\n`,
          );
        }
        if (accounts.length === 0) io.err('no accounts\n');
        return 0;
      },
      io,
    );
  },
};

const disable = {
  summary: 'Stop an account from signing in, and end its sessions',
  help: `Usage: gatehouse users disable <email|user id>

Blocks the account: no sign-in of any kind (password, MFA, magic link, provider) and no refresh; its
sessions end and its open links (password reset, magic link, activation) stop working. Its access tokens
already issued are refused by every running instance within a second. gatehouse users enable lifts the
block.`,
  async run(args: string[], io: CliIO) {
    const { operands, options } = split(args, []);
    const ref = oneOperand(operands, 'email or user id of the account');
    parseOptions(options, {});
    return operate(io, () =>
      withDatabase(
        configOf(io),
        async (deps) => {
          const account = await findAccount(deps.db, ref);
          const ended = await disableUser(deps, account);
          io.err(`disabled ${account.email ?? account.user_id}; ${ended} session(s) ended\n`);
          return 0;
        },
        io,
      ),
    );
  },
};

const enable = {
  summary: 'Let a disabled (or not yet activated) account sign in',
  help: `Usage: gatehouse users enable <email|user id>

Lifts a block set by gatehouse users disable. An account still waiting for activation is activated:
the operator vouches for the address, as its activation link would have.`,
  async run(args: string[], io: CliIO) {
    const { operands, options } = split(args, []);
    const ref = oneOperand(operands, 'email or user id of the account');
    parseOptions(options, {});
    return operate(io, () =>
      withDatabase(
        configOf(io),
        async (deps) => {
          const account = await findAccount(deps.db, ref);
          await enableUser(deps, account);
          io.err(`enabled ${account.email ?? account.user_id}\n`);
          return 0;
        },
        io,
      ),
    );
  },
};

const setRole = {
  summary: "Set an account's default role and roles",
  help: `Usage: gatehouse users set-role <email|user id> --default-role ROLE [--roles A,B]

Sets the default role (x-hasura-default-role) and, with --roles, the roles (x-hasura-allowed-roles);
without --roles the account keeps its roles, plus ROLE when it lacks it. The roles must exist in
auth.roles. A role added reaches the account's tokens at their next refresh; taking a role away (or
changing the default role) ends the account's sessions, so that no access token keeps a lost role.`,
  async run(args: string[], io: CliIO) {
    const valued = ['default-role', 'roles'];
    const { operands, options } = split(args, valued);
    const ref = oneOperand(operands, 'email or user id of the account');
    const { values } = parseOptions(options, { values: valued });
    const defaultRole = values['default-role'];
    if (defaultRole === undefined) throw new UsageError('--default-role is required');
    return operate(io, () =>
      withDatabase(
        configOf(io),
        async (deps) => {
          const account = await findAccount(deps.db, ref);
          const set = await setUserRoles(deps, account, { defaultRole, roles: roleList(values['roles']) });
          io.err(
            `${account.email ?? account.user_id}: default role ${set.defaultRole}, roles ${set.roles.join(', ')} (${
              set.sessionsEnded > 0 ? `${set.sessionsEnded} session(s) ended` : 'from the next refresh on'
            })\n`,
          );
          return 0;
        },
        io,
      ),
    );
  },
};

const resetLinkCmd = {
  summary: 'Print a password-reset link for an account (for support)',
  help: `Usage: gatehouse users reset-link <email|user id>

Issues a password-reset ticket exactly as the lost-password email does (single use, valid
TICKET_PASSWORD_RESET_EXPIRES_IN minutes; the account's earlier reset links stop working) and prints
the link, built like the email's (REDIRECT_URL_SUCCESS, else SERVER_URL, with ?ticket=…&type=password-reset).
Needs LOST_PASSWORD_ENABLED (without it the service refuses reset tickets). The link lets whoever
holds it set the password: it is printed to standard output only, never logged;
hand it to the account's owner over a channel you trust.`,
  async run(args: string[], io: CliIO) {
    const { operands, options } = split(args, []);
    const ref = oneOperand(operands, 'email or user id of the account');
    parseOptions(options, {});
    return operate(io, () =>
      withDatabase(
        configOf(io),
        async (deps) => {
          const account = await findAccount(deps.db, ref);
          const { link, expiresAt } = await resetLink(deps, account);
          io.out(`${link}\n`);
          io.err(`valid once, until ${expiresAt.toISOString()}\n`);
          return 0;
        },
        io,
      ),
    );
  },
};

const sessions = {
  summary: "List an account's sessions (where it is signed in)",
  help: `Usage: gatehouse users sessions <email|user id> [--json]

One line per live session, newest first: session id (the sid of its access tokens), sign-in time, last
activity, sign-in method, client address and user agent. --json prints the array GET /auth/sessions
answers its owner (without "current").`,
  async run(args: string[], io: CliIO) {
    const { operands, options } = split(args, []);
    const ref = oneOperand(operands, 'email or user id of the account');
    const { flags } = parseOptions(options, { flags: ['json'] });
    return operate(io, () =>
      withDatabase(configOf(io), async (deps) => {
        const account = await findAccount(deps.db, ref);
        const rows = await userSessions(deps, account);
        if (flags.has('json')) {
          const out = rows.map((r) => ({
            id: r.id,
            created_at: r.created_at.toISOString(),
            last_active_at: r.last_active_at.toISOString(),
            expires_at: r.expires_at.toISOString(),
            sign_in_method: r.sign_in_method,
            user_agent: r.user_agent,
            ip: r.ip,
          }));
          io.out(`${JSON.stringify(out, null, 2)}\n`);
          return 0;
        }
        for (const r of rows)
          io.out(
            `${r.id}  ${r.created_at.toISOString()}  ${r.last_active_at.toISOString()}  ${r.sign_in_method ?? '-'}  ${r.ip ?? '-'}  ${r.user_agent ?? '-'}\n`,
          );
        if (rows.length === 0) io.err(`${account.email ?? account.user_id} has no live session\n`);
        return 0;
      }),
    );
  },
};

const signOut = {
  summary: 'End every session of an account, at once',
  help: `Usage: gatehouse users sign-out <email|user id>

Ends every session of the account: its refresh tokens stop working and its access tokens are refused by
every running instance within a second. The account can sign in again (gatehouse users disable blocks it).`,
  async run(args: string[], io: CliIO) {
    const { operands, options } = split(args, []);
    const ref = oneOperand(operands, 'email or user id of the account');
    parseOptions(options, {});
    return operate(io, () =>
      withDatabase(configOf(io), async (deps) => {
        const account = await findAccount(deps.db, ref);
        const ended = await signOutUser(deps, account);
        io.err(`${account.email ?? account.user_id}: ${ended} session(s) ended\n`);
        return 0;
      }),
    );
  },
};

const setQuota = {
  summary: "Set an account's storage quota (bytes, unlimited, or default)",
  help: `Usage: gatehouse users set-quota <email|user id> <bytes|unlimited|default>

Sets what the account may store in all (the sum of the sizes of the files it uploaded), overriding
STORAGE_QUOTA_BYTES: a size (1073741824, 500MB, 10GiB; units of 1024), unlimited, or default (drop the
override: STORAGE_QUOTA_BYTES applies again). Files already stored are kept when the new quota is lower;
the account's next upload is refused with 413 until it is under its quota again. Prints the usage.`,
  async run(args: string[], io: CliIO) {
    const { operands, options } = split(args, []);
    parseOptions(options, {});
    if (operands.length !== 2)
      throw new UsageError(
        operands.length < 2 ? 'give the account and the quota' : `unexpected argument "${operands[2]}"`,
      );
    const [ref, raw] = operands as [string, string];
    const quota = parseQuota(raw);
    if (quota === undefined)
      throw new UsageError(`"${raw}" is not a quota: give a size such as 10GiB, unlimited, or default`);
    const config = configOf(io);
    return operate(io, () =>
      withDatabase(
        config,
        async ({ db }) => {
          const account = await findAccount(db, ref);
          await setUserQuota(db, account.user_id, quota);
          const usage = await storageUsage({ db, config }, account.user_id);
          const shown = (n: number | null) => (n === null ? 'unlimited' : `${n} bytes`);
          io.out(`${JSON.stringify(usage)}\n`);
          io.err(
            `${account.email ?? account.user_id}: quota ${shown(usage.quota_bytes)}${
              quota === 'default' ? ' (STORAGE_QUOTA_BYTES)' : ''
            }; ${usage.used_bytes} bytes used in ${usage.files} file(s)\n`,
          );
          return 0;
        },
        io,
      ),
    );
  },
};

const subs = {
  create,
  list,
  disable,
  enable,
  'set-role': setRole,
  'reset-link': resetLinkCmd,
  sessions,
  'sign-out': signOut,
  'set-quota': setQuota,
};

const users: Command = {
  name: 'users',
  summary: 'Accounts: create, list, disable, enable, set-role, reset-link, sessions, sign-out, set-quota',
  help: `Usage: gatehouse users <subcommand> [options]

${Object.entries(subs)
  .map(([n, s]) => `  ${n.padEnd(10)}  ${s.summary}`)
  .join('\n')}

Run gatehouse users <subcommand> --help for its options.`,
  run: subcommands('users', subs),
};

export default users;
