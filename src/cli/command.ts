/**
 * What a `gatehouse` command is. A command is one file in `src/cli/commands/` that default-exports a
 * Command; the dispatcher (main.ts) finds it there, so adding a command touches nothing else. A command
 * with subcommands (`gatehouse keys rotate`) builds its `run` with `subcommands()`.
 */
import { type Config, ConfigError, loadConfig, readEnv } from '../config.ts';
import type { Database } from '../db/database.ts';

export interface CliIO {
  /** Normal output (what a script may read). */
  out(text: string): void;
  /** Messages for the person: progress, warnings, errors. */
  err(text: string): void;
  env: Record<string, string | undefined>;
  cwd: string;
  /** All of standard input (read only by a command asked to, e.g. `--password-stdin`). */
  input(): string;
  now(): Date;
  /**
   * Set when the command runs inside the development service (the CLI forwarded it there because the
   * service holds the embedded database, see remote.ts): that service's settings and open database, so
   * that the command acts on them, and its links name the service's own SERVER_URL and PORT.
   */
  service?: { config: Config; db: Database };
}

export interface Command {
  /** The word after `gatehouse`. */
  name: string;
  /** One line for `gatehouse --help`. */
  summary: string;
  /** The text of `gatehouse <name> --help`: usage lines and options. */
  help: string;
  /** Returns the exit code: 0 done, 1 failed, 2 used wrongly. */
  run(args: string[], io: CliIO): Promise<number>;
}

/** Thrown for a command line that cannot be run as given; the dispatcher prints it with the help. */
export class UsageError extends Error {}

export interface Subcommand {
  summary: string;
  /** Usage and options of this subcommand (shown by `gatehouse <cmd> <sub> --help`). */
  help: string;
  run(args: string[], io: CliIO): Promise<number>;
}

/** A `run` that dispatches on its first argument among `subs`, with `--help` at each level. */
export function subcommands(name: string, subs: Record<string, Subcommand>): Command['run'] {
  return async (args, io) => {
    const [sub, ...rest] = args;
    const chosen = sub === undefined ? undefined : subs[sub];
    if (!chosen) {
      if (sub !== undefined && sub !== '--help' && sub !== '-h')
        io.err(`gatehouse ${name}: unknown subcommand "${sub}"\n`);
      io.out(subcommandList(name, subs));
      return sub === '--help' || sub === '-h' ? 0 : 2;
    }
    if (rest.includes('--help') || rest.includes('-h')) {
      io.out(`${chosen.help.trimEnd()}\n`);
      return 0;
    }
    try {
      return await chosen.run(rest, io);
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      io.err(`gatehouse ${name} ${sub}: ${err.message}\n\n${chosen.help.trimEnd()}\n`);
      return 2;
    }
  };
}

export function subcommandList(name: string, subs: Record<string, Subcommand>): string {
  const width = Math.max(...Object.keys(subs).map((s) => s.length));
  const lines = Object.entries(subs).map(([s, c]) => `  ${s.padEnd(width)}  ${c.summary}`);
  return `Usage: gatehouse ${name} <subcommand> [options]\n\n${lines.join('\n')}\n\nRun gatehouse ${name} <subcommand> --help for its options.\n`;
}

/** Parses `--name value`, `--name=value` and bare `--flag` options; refuses unknown ones and operands. */
export function parseOptions(
  args: string[],
  known: { values?: readonly string[]; flags?: readonly string[] },
): { values: Record<string, string>; flags: Set<string> } {
  const values: Record<string, string> = {};
  const flags = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new UsageError(`unexpected argument "${arg}"`);
    const [, name = '', inline] = m;
    if (known.flags?.includes(name) && inline === undefined) flags.add(name);
    else if (known.values?.includes(name)) {
      const value = inline ?? args[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      values[name] = value;
    } else throw new UsageError(`unknown option --${name}`);
  }
  return { values, flags };
}

/** The service's configuration as the server would read it (environment and .env files). */
export function configOf(io: CliIO): Config {
  return io.service?.config ?? loadConfig(readEnv(io.env, io.cwd));
}

export { ConfigError };
