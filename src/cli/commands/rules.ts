/**
 * `gatehouse rules`: the storage rules. `check` loads a rules file with the loader the service runs at
 * start; `explain` decides one request with the service's evaluator, traced, and prints every path entry
 * consulted, every rule tried, the value of each sub-expression and the decision.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { findAccountByEmail, findAccountByUserId, loadProfile } from '../../auth/accounts-store.ts';
import { claimsOf } from '../../auth/sessions.ts';
import type { Config } from '../../config.ts';
import { AppError } from '../../errors.ts';
import { createObjectStore } from '../../storage/backends/index.ts';
import { parseKey } from '../../storage/keys.ts';
import { fileTokens, formatExplanation } from '../../storage/rules/explain.ts';
import { NOT_YET_KNOWN } from '../../storage/rules/expression.ts';
import {
  loadRules,
  type Operation,
  parseRules,
  RulesFileError,
  type StorageRules,
} from '../../storage/rules/rules.ts';
import { toMetadata } from '../../storage/service.ts';
import { type CliIO, type Command, configOf, parseOptions, subcommands, UsageError } from '../command.ts';
import { withDatabase } from '../database.ts';

/** The rules of `file` as the start reads them; a missing file is an error here (the start would use the defaults). */
function rulesFile(io: CliIO, file: string): StorageRules {
  const full = path.resolve(io.cwd, file);
  if (!existsSync(full)) throw new RulesFileError(`${file} does not exist`);
  return parseRules(readFileSync(full, 'utf8'), file);
}

const check = {
  summary: 'Check a rules file as the service does at start',
  help: `Usage: gatehouse rules check [FILE]

Loads FILE (default: STORAGE_RULES_PATH, as the service would) with the loader the service runs at
start: YAML syntax, sections, path patterns, rule keys, expressions, function names, calls and loops.
Exits 0 when it would load, 1 with the file, the line and the problem when it would stop the start.`,
  async run(args: string[], io: CliIO) {
    const operands = args.filter((a) => !a.startsWith('--'));
    parseOptions(
      args.filter((a) => a.startsWith('--')),
      {},
    );
    if (operands.length > 1) throw new UsageError(`unexpected argument "${operands[1]}"`);
    try {
      if (operands[0] !== undefined) {
        rulesFile(io, operands[0]);
        io.out(`${operands[0]}: valid\n`);
      } else {
        const config = configOf(io);
        const rules = loadRules(config.STORAGE_RULES_PATH);
        io.out(
          existsSync(config.STORAGE_RULES_PATH)
            ? `${rules.source}: valid\n`
            : `${config.STORAGE_RULES_PATH} does not exist: the service uses the built-in default rules\n`,
        );
      }
      return 0;
    } catch (err) {
      if (!(err instanceof RulesFileError)) throw err;
      io.err(`${err.message}\n`);
      return 1;
    }
  },
};

const OPERATIONS: Record<string, string> = {
  GET: 'get (a file) or list (a folder, ending in "/")',
  HEAD: 'get',
  POST: 'create, or update when the file exists',
  PUT: 'create, or update when the file exists',
  DELETE: 'delete',
};

/** The claims of a user as its next access token would carry them (roles and custom fields read now). */
async function claimsOfUser(config: Config, ref: string, io: CliIO): Promise<Record<string, unknown>> {
  return withDatabase(
    config,
    async ({ db }) => {
      const account = ref.includes('@')
        ? await findAccountByEmail(db, ref)
        : await findAccountByUserId(db, ref);
      const profile = account && (await loadProfile(db, account.id));
      if (!profile)
        throw new ExplainError(`no account has the ${ref.includes('@') ? 'email' : 'user id'} "${ref}"`);
      return claimsOf(config, profile);
    },
    io,
  );
}

class ExplainError extends Error {}

/** Claims given as JSON, as a token carries them (`x-hasura-` prefixes dropped, as the service does). */
function claimsFromJson(text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError('--claims must be a JSON object');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new UsageError('--claims must be a JSON object');
  const vars: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(parsed as Record<string, unknown>))
    vars[k.startsWith('x-hasura-') ? k.slice('x-hasura-'.length) : k] = v;
  return vars;
}

const explain = {
  summary: 'Explain the decision of the rules for one request',
  help: `Usage: gatehouse rules explain <METHOD> <path> [--user <email|user id> | --claims JSON | --anonymous]
                              [--token FILE_TOKEN] [--size BYTES] [--type MIME] [--rules FILE]

Decides the request as the service would, with the same evaluator, and prints every path entry that
answers the operation (in file order, up to the one that decides), each rule tried, the value of every
sub-expression, and the decision.

  METHOD, path     GET, HEAD, POST, PUT or DELETE, and the storage path (/storage/o/user/…/a.png, or
                   the key alone: /user/…/a.png; a folder ends in "/"). GET on a folder is list; POST
                   and PUT are create, or update when the file exists.
  --user REF       the caller is this account: its claims are read from the database as its next
                   access token would carry them.
  --claims JSON    the caller's claims as given ({"x-hasura-user-id": "…", …}).
  --anonymous      no access token (the default).
  --token T        the file token sent (?token=…).
  --size, --type   the size and type of an upload (what rules see in resource.size and
                   resource.mimetype); without --size a rule that reads it leaves the decision open.
  --rules FILE     these rules instead of STORAGE_RULES_PATH (or the built-in defaults).

The file's metadata (what rules see in resource) is read from the configured store, as the service
does. File tokens are never printed: they show as [the file's token] and [another token].
Exit status: 0 allowed, 3 denied (or open), 1 failure, 2 wrong usage.`,
  async run(args: string[], io: CliIO) {
    const valued = ['user', 'claims', 'token', 'size', 'type', 'rules'];
    const operands: string[] = [];
    const options: string[] = [];
    for (let i = 0; i < args.length; i++) {
      const a = args[i] as string;
      if (!a.startsWith('--')) operands.push(a);
      else {
        options.push(a);
        if (valued.includes(a.slice(2)) && args[i + 1] !== undefined) options.push(args[++i] as string);
      }
    }
    const { values, flags } = parseOptions(options, { values: valued, flags: ['anonymous'] });
    if (operands.length !== 2) throw new UsageError('give a METHOD and a path');
    const method = (operands[0] as string).toUpperCase();
    if (!(method in OPERATIONS))
      throw new UsageError(`METHOD must be one of ${Object.keys(OPERATIONS).join(', ')}`);
    const who =
      ['user', 'claims'].filter((k) => values[k] !== undefined).length + (flags.has('anonymous') ? 1 : 0);
    if (who > 1) throw new UsageError('give one of --user, --claims and --anonymous');
    let size: number | typeof NOT_YET_KNOWN = NOT_YET_KNOWN;
    if (values['size'] !== undefined) {
      if (!/^\d+$/.test(values['size'])) throw new UsageError('--size must be a number of bytes');
      size = Number(values['size']);
    }
    const raw = (operands[1] as string).replace(/^\/storage\/[om]\//, '/');
    if (!raw.startsWith('/')) throw new UsageError('the path must start with "/"');

    const config = configOf(io);
    try {
      const rules =
        values['rules'] !== undefined ? rulesFile(io, values['rules']) : loadRules(config.STORAGE_RULES_PATH);
      let key: ReturnType<typeof parseKey>;
      try {
        key = parseKey(raw.slice(1));
      } catch (err) {
        if (err instanceof AppError) throw new ExplainError(err.message);
        throw err;
      }
      const auth =
        values['user'] !== undefined
          ? await claimsOfUser(config, values['user'], io)
          : values['claims'] !== undefined
            ? claimsFromJson(values['claims'])
            : undefined;
      const objects = await createObjectStore(config);
      let info: Awaited<ReturnType<typeof objects.head>>;
      try {
        info = key.folder ? undefined : await objects.head(key.key);
      } finally {
        await objects.close();
      }
      let op: Operation;
      let resource: unknown;
      if (method === 'GET' || method === 'HEAD') {
        op = key.folder && method === 'GET' ? 'list' : 'get';
        resource = info ? toMetadata(info) : undefined;
      } else if (method === 'DELETE') {
        op = 'delete';
        resource = info ? toMetadata(info) : undefined;
      } else {
        op = info ? 'update' : 'create';
        const name = key.key.slice(key.key.lastIndexOf('/') + 1);
        resource = { name, size, mimetype: values['type'] ?? 'application/octet-stream' };
      }
      const query = values['token'] !== undefined ? { token: values['token'] } : {};
      const input = { path: key.path, method, query, auth, resource };
      const explanation = rules.explain(op, input);
      io.out(`rules: ${rules.source}\n`);
      io.out(`caller: ${auth ? `claims ${JSON.stringify(auth)}` : 'anonymous (no access token)'}\n`);
      if (!key.folder)
        io.out(`file: ${info ? `exists (${info.size} bytes, ${info.contentType})` : 'does not exist'}\n`);
      for (const line of formatExplanation(explanation, fileTokens(query, resource))) io.out(`${line}\n`);
      return explanation.decision.allowed === true ? 0 : 3;
    } catch (err) {
      if (!(err instanceof RulesFileError || err instanceof ExplainError)) throw err;
      io.err(`${err.message}\n`);
      return 1;
    }
  },
};

const rules: Command = {
  name: 'rules',
  summary: 'Storage rules: check a file, explain a decision',
  help: `Usage: gatehouse rules <check|explain> [options]

  check    ${check.summary}
  explain  ${explain.summary}

Run gatehouse rules <subcommand> --help for its options.`,
  run: subcommands('rules', { check, explain }),
};

export default rules;
