import type { Row } from './report.ts';

export interface BenchEnv {
  quick: boolean;
  /** Seconds each load phase runs. */
  durationS: number;
  /** PostgreSQL URL for scenarios that need it (refresh), or undefined. */
  pgUrl: string | undefined;
  /** Database the service uses in the general scenarios. */
  db: 'pglite' | 'postgres';
  log(msg: string): void;
}

export type Scenario = { name: string; run(env: BenchEnv): Promise<Row[]> };

/** Env for startService: the embedded database, or a fresh PostgreSQL database. */
export function dbEnv(env: BenchEnv, database?: string): Record<string, string> {
  if (env.db === 'pglite' || !env.pgUrl) return {};
  const u = new URL(env.pgUrl);
  if (database) u.pathname = `/${database}`;
  return { DATABASE_URL: u.toString() };
}
