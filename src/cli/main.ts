/**
 * `gatehouse`: the operator's command line (package.json `bin`). Commands are the files of
 * `commands/`, each default-exporting a Command (see command.ts); this file only finds them, prints the
 * help and runs the one asked for. Exit codes: 0 done, 1 failed, 2 used wrongly.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PROCESS_UMASK } from '../data-dir.ts';
import { DatabaseInUse } from '../db/database.ts';
import { type CliIO, type Command, ConfigError, configOf, UsageError } from './command.ts';
import { forwardToService } from './remote.ts';

const COMMANDS_DIR = fileURLToPath(new URL('./commands/', import.meta.url));

/** Every command in `commands/`, by name. */
export async function loadCommands(dir = COMMANDS_DIR): Promise<Map<string, Command>> {
  // The commands in this module's own language: compiled trees (dist/, the test build) hold .js files,
  // and the test build keeps the .ts sources beside them.
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(ext) && !/\.(test|d)\.[tj]s$/.test(f))
    .sort();
  const commands = new Map<string, Command>();
  for (const f of files) {
    const mod = (await import(pathToFileURL(path.join(dir, f)).href)) as { default?: Command };
    const cmd = mod.default;
    if (!cmd || typeof cmd.run !== 'function' || !cmd.name)
      throw new Error(`${f} in ${dir} does not default-export a command`);
    if (commands.has(cmd.name)) throw new Error(`two commands are named ${cmd.name}`);
    commands.set(cmd.name, cmd);
  }
  return commands;
}

function overview(commands: Map<string, Command>): string {
  const width = Math.max(...[...commands.keys()].map((n) => n.length));
  const lines = [...commands.values()].map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    'Usage: gatehouse <command> [options]',
    '',
    'Operator commands for a Gatehouse installation. They read the same settings as the service',
    '(environment, then .env and .env.<NODE_ENV> in the working directory).',
    '',
    'Commands:',
    ...lines,
    '',
    'Run gatehouse <command> --help for the options of one command.',
    '',
  ].join('\n');
}

export async function runCli(argv: string[], io: CliIO): Promise<number> {
  const commands = await loadCommands();
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.out(overview(commands));
    return name === undefined ? 2 : 0;
  }
  const cmd = commands.get(name);
  if (!cmd) {
    io.err(`gatehouse: unknown command "${name}"\n\n`);
    io.out(overview(commands));
    return 2;
  }
  if (args[0] === '--help' || args[0] === '-h') {
    io.out(`${cmd.help.trimEnd()}\n`);
    return 0;
  }
  // Standard input is read once: kept, so that a command forwarded to the service gets it too.
  let stdin: string | undefined;
  const local: CliIO = {
    ...io,
    input: () => {
      stdin ??= io.input();
      return stdin;
    },
  };
  try {
    return await cmd.run(args, local);
  } catch (err) {
    if (err instanceof DatabaseInUse && !io.service) {
      // The development service holds the embedded database: it runs the command (remote.ts).
      const code = await forwardToService(configOf(io).DATA_DIR, argv, io, stdin);
      if (code !== undefined) return code;
    }
    if (err instanceof UsageError) {
      io.err(`gatehouse ${name}: ${err.message}\n\n${cmd.help.trimEnd()}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      io.err(`${err.message}\n`);
      return 1;
    }
    // Anything else is a failure to report in a line, not a stack trace (GATEHOUSE_DEBUG=1 shows it).
    io.err(`gatehouse ${name}: ${describeError(err)}\n`);
    if (io.env['GATEHOUSE_DEBUG']) io.err(`${(err as Error)?.stack ?? err}\n`);
    return 1;
  }
}

/** One line for a failure: its message, or what a message-less network error carries. */
export function describeError(err: unknown): string {
  const e = err as { message?: string; code?: string; errors?: unknown[]; cause?: unknown } | undefined;
  if (e?.message) return e.message;
  if (Array.isArray(e?.errors) && e.errors.length > 0) return describeError(e.errors[0]);
  if (e?.cause) return describeError(e.cause);
  return e?.code ?? String(err);
}

export const processIO: CliIO = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  env: process.env,
  cwd: process.cwd(),
  input: () => readFileSync(0, 'utf8'),
  now: () => new Date(),
};

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // Keys and files a command writes into DATA_DIR are the owner's only, as the service's are.
  process.umask(PROCESS_UMASK);
  process.exitCode = await runCli(process.argv.slice(2), processIO);
}
