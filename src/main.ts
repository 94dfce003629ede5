/**
 * Process entry: read the configuration, start the server, and stop it gracefully on SIGTERM/SIGINT (see
 * server.ts). A start that cannot succeed exits 1 with a message for a person on stderr: every
 * configuration and key problem at once (before the database is opened), or one line naming what is in
 * the way (a port in use, an embedded database in use) and what to do about it.
 */
import { type Config, ConfigError, loadConfig, readEnv } from './config.ts';
import { PROCESS_UMASK } from './data-dir.ts';
import { createLogger } from './http/logging.ts';
import { installShutdown, startFailure, startServer } from './server.ts';

function refuse(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

// Whatever this process creates (PGlite's files, the image cache, a library's temporary file) is its
// owner's only, whatever umask it was started with; worker threads share the process's umask.
process.umask(PROCESS_UMASK);

let config: Config;
try {
  config = loadConfig(readEnv());
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  refuse(err.message);
}

const log = createLogger(config.LOG_LEVEL);
try {
  const server = await startServer(config, { log });
  installShutdown(server, { log });
} catch (err) {
  if (err instanceof ConfigError) refuse(err.message);
  const known = startFailure(err, config);
  if (known) refuse(`Cannot start: ${known}`);
  log.fatal({ err }, `cannot start: ${(err as Error).message}`);
  process.exit(1);
}
