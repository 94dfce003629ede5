/**
 * The cost of the revoked list on every authenticated request: GET /auth/hasura (the GraphQL engine's
 * webhook, which does nothing but verify the access token and check it against the list) on an instance
 * whose list holds 10,000 ended sessions, against the same route on an instance whose list is empty,
 * measured in the same run in alternating windows (medians reported). Both instances run the same build
 * on PostgreSQL; the full one loads its list from auth.revocations at start, and /metrics confirms the
 * size of each list before any load. The token names a session (`sid`) that is not on the list, so every
 * request pays for both lookups and is answered 200.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { openPostgres } from '../../src/db/database.ts';
import type { BenchEnv, Scenario } from '../lib/env.ts';
import { runLoad } from '../lib/load.ts';
import { type Row, row } from '../lib/report.ts';
import { type Service, startService } from '../lib/service.ts';
import { BENCH_JWT_KEY, BENCH_USER, HS_ENV } from '../lib/tokens.ts';
import { median } from './storage.ts';

const REVOKED = 10_000;
const CONNECTIONS = 16;
const METRICS_TOKEN = 'bench-metrics-token-bench-metrics-token-0123';

/** An access token for BENCH_USER that names a session of its own (not a revoked one). */
function tokenWithSession(): Promise<string> {
  return new SignJWT({
    'https://hasura.io/jwt/claims': {
      'x-hasura-user-id': BENCH_USER,
      'x-hasura-allowed-roles': ['user'],
      'x-hasura-default-role': 'user',
    },
    sid: randomUUID(),
  })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(BENCH_USER)
    .setIssuer('nhost')
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(BENCH_JWT_KEY));
}

/** The instance's revoked-list size, from its metrics. */
async function listSize(svc: Service): Promise<number> {
  const res = await fetch(`${svc.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const text = await res.text();
  const m = /^gatehouse_revoked_list_entries (\d+)/m.exec(text);
  if (!m) throw new Error(`no gatehouse_revoked_list_entries in /metrics (${res.status})`);
  return Number(m[1]);
}

/** A fresh database (dropped by `drop`), its URL. */
async function freshDatabase(pgUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `gatehouse_bench_${randomBytes(4).toString('hex')}`;
  const admin = openPostgres(pgUrl, 1);
  await admin.exec(`CREATE DATABASE ${name}`);
  await admin.close();
  const u = new URL(pgUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const a = openPostgres(pgUrl, 1);
      await a.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.close();
    },
  };
}

export const revokedListScenarios: Scenario = {
  name: 'revoked-list',
  async run(env: BenchEnv): Promise<Row[]> {
    if (!env.pgUrl)
      throw new Error('the revoked-list scenario needs PostgreSQL (BENCH_DATABASE_URL or TEST_DATABASE_URL)');
    const emptyDb = await freshDatabase(env.pgUrl);
    const fullDb = await freshDatabase(env.pgUrl);
    const vars = { ...HS_ENV, METRICS_TOKEN };
    const started: Service[] = [];
    try {
      // The full instance's database is migrated by a first start, then given its 10,000 ended sessions
      // (live for an hour: the list keeps them), which the second start loads.
      const first = await startService({ ...vars, DATABASE_URL: fullDb.url });
      await first.stop();
      const db = openPostgres(fullDb.url, 1);
      await db.query(
        'bench-revoke',
        `INSERT INTO auth.revocations (session_id, created_at, expires_at)
         SELECT gen_random_uuid(), now(), now() + interval '1 hour' FROM generate_series(1, $1::int)`,
        [REVOKED],
      );
      await db.close();
      const empty = await startService({ ...vars, DATABASE_URL: emptyDb.url });
      started.push(empty);
      const full = await startService({ ...vars, DATABASE_URL: fullDb.url });
      started.push(full);
      const [emptySize, fullSize] = [await listSize(empty), await listSize(full)];
      if (emptySize !== 0 || fullSize !== REVOKED)
        throw new Error(`revoked lists hold ${emptySize} and ${fullSize} entries, not 0 and ${REVOKED}`);

      const headers = { authorization: `Bearer ${await tokenWithSession()}` };
      const fullRps: number[] = [];
      const emptyRps: number[] = [];
      const fullP99: number[] = [];
      const windows = env.quick ? 1 : 3;
      for (let w = 1; w <= windows; w++) {
        for (const [svc, rps, p99, label] of [
          [empty, emptyRps, undefined, 'empty'],
          [full, fullRps, fullP99, `${REVOKED} entries`],
        ] as const) {
          env.log(`GET /auth/hasura, revoked list ${label} (${w}/${windows})`);
          const load = await runLoad({
            url: `${svc.url}/auth/hasura`,
            headers,
            connections: CONNECTIONS,
            durationS: env.durationS,
          });
          if (load.non2xx > 0 || load.errors > 0)
            throw new Error(
              `webhook load had ${load.non2xx} non-2xx answers and ${load.errors} errors: ${JSON.stringify(load.statusCodes)}`,
            );
          rps.push(load.requestsPerSec);
          p99?.push(load.latencyP99);
        }
      }
      return [
        row(
          `GET /auth/hasura, ${REVOKED} revoked sessions vs none (PostgreSQL)`,
          'req/s',
          median(fullRps),
          median(emptyRps),
          { kind: 'min-ratio', value: 0.95 },
          {
            connections: CONNECTIONS,
            windows,
            p99ms: median(fullP99),
            listed: fullSize,
          },
        ),
      ];
    } finally {
      for (const s of started) await s.stop();
      await emptyDb.drop();
      await fullDb.drop();
    }
  },
};
