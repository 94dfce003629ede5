import { randomBytes } from 'node:crypto';
import { openPostgres } from '../../src/db/database.ts';
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

/**
 * Service settings for the database the run asked for: nothing for the embedded one, or a fresh
 * PostgreSQL database (dropped by `drop`).
 */
export async function serviceDatabase(
  env: BenchEnv,
): Promise<{ vars: Record<string, string>; drop(): Promise<void> }> {
  if (env.db === 'pglite' || !env.pgUrl) return { vars: {}, drop: async () => {} };
  const name = `gatehouse_bench_${randomBytes(4).toString('hex')}`;
  const admin = openPostgres(env.pgUrl, 1);
  await admin.exec(`CREATE DATABASE ${name}`);
  await admin.close();
  const u = new URL(env.pgUrl);
  u.pathname = `/${name}`;
  return {
    vars: { DATABASE_URL: u.toString() },
    async drop() {
      const a = openPostgres(env.pgUrl as string, 1);
      await a.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.close();
    },
  };
}
