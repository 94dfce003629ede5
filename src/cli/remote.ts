/**
 * The CLI beside the development service. The embedded database (PGlite) is one process's, so while the
 * service runs, `gatehouse users list` cannot open it. The service therefore listens on a unix socket,
 * DATA_DIR/cli.sock (owner only: 0600 in a 0700 folder, so only who can already read the database files
 * can connect), and a CLI that finds the database held forwards its command line there; the service runs
 * it with its own settings and open database and streams the output back. With DATABASE_URL there is no
 * socket: every process connects to PostgreSQL itself.
 *
 * Protocol: the CLI sends one JSON line `{argv, stdin?}` and closes its side; the service answers with
 * JSON lines `{out}` / `{err}` and a last `{exit}`.
 */
import { chmodSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { CliIO } from './command.ts';

/** Longest unix socket path the platforms accept (Linux 107 bytes, macOS 103). */
const MAX_SOCKET_PATH = 100;

export function cliSocketPath(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'cli.sock');
}

interface Request {
  argv: string[];
  stdin?: string;
}

export interface CliSocket {
  path: string;
  close(): Promise<void>;
}

/**
 * Serves forwarded commands on DATA_DIR/cli.sock; undefined when the path is too long for a socket (the
 * CLI then says the database is in use, as before).
 */
export async function serveCliSocket(
  service: { config: Config; db: Database },
  run: (argv: string[], io: CliIO) => Promise<number>,
  log: FastifyBaseLogger,
): Promise<CliSocket | undefined> {
  const file = cliSocketPath(service.config.DATA_DIR);
  if (Buffer.byteLength(file) > MAX_SOCKET_PATH) {
    log.warn(
      { file },
      'DATA_DIR is too long a path for the CLI socket: gatehouse commands need the service stopped',
    );
    return undefined;
  }
  // This process holds the embedded database, so a socket file left here is a stopped service's.
  rmSync(file, { force: true });
  // Half-open: the CLI ends its side after the request, and the answer still has to go back.
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    let input = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      input += chunk;
    });
    socket.on('error', () => {});
    socket.on('end', () => {
      const send = (line: Record<string, unknown>) => {
        if (!socket.destroyed) socket.write(`${JSON.stringify(line)}\n`);
      };
      void (async () => {
        let code = 1;
        try {
          const req = JSON.parse(input) as Request;
          if (!Array.isArray(req.argv) || !req.argv.every((a) => typeof a === 'string'))
            throw new Error('not a command line');
          const io: CliIO = {
            out: (text) => send({ out: text }),
            err: (text) => send({ err: text }),
            env: {},
            cwd: process.cwd(),
            input: () => req.stdin ?? '',
            now: () => new Date(),
            service,
          };
          log.info({ command: req.argv.slice(0, 2).join(' ') }, 'running a gatehouse command for the CLI');
          code = await run(req.argv, io);
        } catch (err) {
          send({ err: `gatehouse: the service could not run the command: ${(err as Error).message}\n` });
        }
        send({ exit: code });
        socket.end();
      })();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(file, 0o600);
  // The HTTP server is what keeps a service running: a process whose server has closed (a stop, or a
  // test that built a server) must not be held open by this socket alone.
  server.unref();
  return {
    path: file,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        rmSync(file, { force: true });
      }),
  };
}

/**
 * Runs `argv` in the service that holds the embedded database of `dataDir`; undefined when no service
 * answers on its socket (the caller reports the database as in use).
 */
export async function forwardToService(
  dataDir: string,
  argv: string[],
  io: CliIO,
  stdin: string | undefined,
): Promise<number | undefined> {
  const file = cliSocketPath(dataDir);
  return new Promise((resolve) => {
    const socket = net.createConnection(file);
    let connected = false;
    let pending = '';
    let exit: number | undefined;
    socket.setEncoding('utf8');
    socket.on('connect', () => {
      connected = true;
      socket.end(`${JSON.stringify({ argv, ...(stdin === undefined ? {} : { stdin }) })}\n`);
    });
    socket.on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line === '') continue;
        const msg = JSON.parse(line) as { out?: string; err?: string; exit?: number };
        if (msg.out !== undefined) io.out(msg.out);
        if (msg.err !== undefined) io.err(msg.err);
        if (msg.exit !== undefined) exit = msg.exit;
      }
    });
    socket.on('error', () => resolve(connected ? 1 : undefined));
    socket.on('close', () => resolve(connected ? (exit ?? 1) : undefined));
  });
}
