/**
 * Token refresh on PostgreSQL (HS256 and RS256) against the same SQL statements the refresh runs, issued
 * directly through the same store functions over `pg` at the same concurrency: the database's own limit
 * on this machine.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { loadProfile } from '../../src/auth/accounts-store.ts';
import { findSessionToken, insertSessionToken, rotateSessionToken } from '../../src/auth/sessions-store.ts';
import { openPostgres } from '../../src/db/database.ts';
import type { BenchEnv, Scenario } from '../lib/env.ts';
import { runLoad } from '../lib/load.ts';
import { type Row, row } from '../lib/report.ts';
import { startService } from '../lib/service.ts';
import { BENCH_JWT_KEY } from '../lib/tokens.ts';

const CONNECTIONS = 16;
const POOL = 10;

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

async function json<T>(res: Response): Promise<T> {
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

/** Refresh tokens of CONNECTIONS separate sign-ins of one user. */
async function signIns(url: string): Promise<string[]> {
  const creds = { email: 'refresh@example.com', password: 'correct horse battery staple', cookie: false };
  const post = (path: string, body: unknown) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  await json(await post('/auth/register', creds));
  const tokens: string[] = [];
  for (let i = 0; i < CONNECTIONS; i++)
    tokens.push((await json<{ refresh_token: string }>(await post('/auth/login', creds))).refresh_token);
  return tokens;
}

/** Replays the refresh's statements with `pg` for `durationS` seconds; returns rotations per second. */
async function sqlBaseline(dbUrl: string, accountId: string, durationS: number): Promise<number> {
  const db = openPostgres(dbUrl, POOL);
  try {
    const start = new Date();
    const expires = new Date(start.getTime() + 30 * 24 * 3600_000);
    let done = 0;
    const end = Date.now() + durationS * 1000;
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        const familyId = randomUUID();
        let hash = sha256Hex(randomBytes(32).toString('base64url'));
        await insertSessionToken(db, {
          tokenHash: hash,
          familyId,
          accountId,
          createdAt: start,
          expiresAt: expires,
          signedInAt: start,
        });
        while (Date.now() < end) {
          const now = new Date();
          const found = await findSessionToken(db, hash);
          if (!found) throw new Error('baseline token vanished');
          await loadProfile(db, found.account_id);
          const next = sha256Hex(randomBytes(32).toString('base64url'));
          // Also drops the account's expired tokens, as the service's rotation does.
          const rotated = await rotateSessionToken(db, hash, {
            tokenHash: next,
            familyId,
            accountId,
            createdAt: now,
            expiresAt: expires,
          });
          if (!rotated) throw new Error('baseline token was already rotated');
          hash = next;
          done++;
        }
      }),
    );
    return done / ((Date.now() - t0) / 1000);
  } finally {
    await db.close();
  }
}

export const refreshScenarios: Scenario = {
  name: 'refresh',
  async run(env: BenchEnv): Promise<Row[]> {
    if (!env.pgUrl)
      throw new Error('the refresh scenario needs PostgreSQL (BENCH_DATABASE_URL or TEST_DATABASE_URL)');
    const rows: Row[] = [];
    for (const alg of ['HS256', 'RS256'] as const) {
      const name = `gatehouse_bench_${randomBytes(4).toString('hex')}`;
      const admin = openPostgres(env.pgUrl, 1);
      await admin.exec(`CREATE DATABASE ${name}`);
      const u = new URL(env.pgUrl);
      u.pathname = `/${name}`;
      const dbUrl = u.toString();
      const svc = await startService({
        DATABASE_URL: dbUrl,
        DATABASE_POOL_SIZE: String(POOL),
        JWT_ALGORITHM: alg,
        ...(alg === 'HS256' ? { JWT_KEY: BENCH_JWT_KEY } : {}),
        // One cheap hash: the scenario measures refresh, not login.
        ARGON2_MEMORY_COST: '1024',
        ARGON2_TIME_COST: '1',
      });
      try {
        const tokens = await signIns(svc.url);
        env.log(`refresh ${alg}`);
        const load = await runLoad({
          url: `${svc.url}/auth/token/refresh`,
          connections: CONNECTIONS,
          durationS: env.durationS,
          refreshTokens: tokens,
        });
        if (load.non2xx > 0 || load.errors > 0)
          throw new Error(
            `refresh load had ${load.non2xx} non-2xx and ${load.errors} errors: ${JSON.stringify(load.statusCodes)}; first: ${load.firstFailure ?? 'none'}`,
          );
        await svc.stop();
        const probe = openPostgres(dbUrl, 1);
        const { rows: acc } = await probe.query<{ id: string }>(
          'bench-account',
          'SELECT id FROM auth.accounts LIMIT 1',
        );
        // Every answered refresh must have been a rotation (not a sibling issued under the reuse grace):
        // the load would otherwise measure a cheaper path than the baseline's statements.
        const { rows: counted } = await probe.query<{ rotated: string }>(
          'bench-rotated',
          'SELECT count(*) AS rotated FROM auth.session_tokens WHERE rotated_at IS NOT NULL',
        );
        await probe.close();
        const rotated = Number(counted[0]?.rotated ?? 0);
        const answered = load.statusCodes['200'] ?? 0;
        if (rotated < answered)
          throw new Error(`refresh load: ${answered} answers but only ${rotated} rotations`);
        env.log(`SQL baseline for ${alg}`);
        const base = await sqlBaseline(dbUrl, acc[0]?.id ?? '', env.durationS);
        rows.push(
          row(
            `token refresh ${alg} (PostgreSQL)`,
            'req/s',
            load.requestsPerSec,
            base,
            alg === 'HS256' ? { kind: 'min-ratio', value: 0.5 } : { kind: 'none', value: 0 },
            {
              connections: CONNECTIONS,
              pool: POOL,
              p50ms: load.latencyP50,
              p99ms: load.latencyP99,
            },
          ),
        );
      } finally {
        await svc.stop();
        await admin.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.close();
      }
    }
    return rows;
  },
};
