/**
 * `npm run fuzz [-- --per-route=10000 --setup=open|limited|both --seed=N --concurrency=8 --minutes=30]`:
 * the long fuzz run. The service runs as its own process (from the sources, on 127.0.0.1), on a fresh
 * PostgreSQL database when TEST_DATABASE_URL (or DATABASE_URL) is set and on the embedded one otherwise,
 * with Redis when REDIS_URL is set. Every route of its /openapi.json gets `--per-route` requests generated
 * and mutated by test/helpers/fuzz.ts (the CI sample in test/reliability/fuzz.test.ts is the same
 * generator, smaller). The run fails (exit 1) on any 5xx, an error answer without the error body, a
 * request with no answer, the service exiting, or a failed health check at the end; it prints the
 * service's memory (first, peak, last, trend of the second half) and stops by itself (`--minutes`).
 */
import {
  asEnv,
  fetchOperations,
  HttpWorld,
  runFuzz,
  SETUPS,
  startPeers,
} from '../test/helpers/fuzz-target.ts';
import { freshDatabase, postgresUrl, RssSampler, startService } from './reliability-service.ts';

const args = process.argv.slice(2);
const flag = (name: string, dflt: string) =>
  args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
const perRoute = Number(flag('per-route', '10000'));
const seed = Number(flag('seed', String(Date.now() % 1_000_000)));
const concurrency = Number(flag('concurrency', '8'));
const minutes = Number(flag('minutes', '30'));
const which = flag('setup', 'open');
const setups = (which === 'both' ? ['open', 'limited'] : [which]) as (keyof typeof SETUPS)[];
const log = (m: string) => process.stdout.write(`[fuzz] ${m}\n`);

let failed = false;
const pgAdmin = postgresUrl();
log(
  pgAdmin
    ? 'database: a fresh PostgreSQL database on TEST_DATABASE_URL'
    : 'database: embedded (set TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres to fuzz on PostgreSQL)',
);
log(
  `seed ${seed}, ${perRoute} requests per route, ${concurrency} at a time, at most ${minutes} min per setup`,
);

for (const setup of setups) {
  const peers = await startPeers();
  const db = pgAdmin ? await freshDatabase(pgAdmin, 'gatehouse_fuzz') : undefined;
  const env: Record<string, string> = {
    ...asEnv(SETUPS[setup](peers)),
    ...(db ? { DATABASE_URL: db.url } : {}),
    ...(process.env['REDIS_URL'] ? { REDIS_URL: process.env['REDIS_URL'] } : {}),
  };
  const service = await startService(env);
  const rss = new RssSampler(service.pid, 2000);
  let exitedEarly: number | string | undefined;
  let stopping = false;
  void service.exited.then((code) => {
    if (!stopping) exitedEarly = code;
  });
  try {
    const world = new HttpWorld(service.url);
    for (let i = 0; i < 4; i++) await world.addUser();
    const operations = await fetchOperations(service.url);
    log(`${setup}: ${operations.length} routes at ${service.url} (pid ${service.pid})`);
    rss.start();
    const deadline = Date.now() + minutes * 60_000;
    const report = await runFuzz({
      base: service.url,
      operations,
      world,
      seed,
      perRoute,
      concurrency,
      spreadClients: setup === 'limited',
      newUserEvery: 500,
      stopAt: deadline,
      progress: (sent) => {
        if (sent % 20_000 === 0)
          log(`${setup}: ${sent} requests, RSS ${Math.round(service.rssBytes() / 1048576)} MB`);
      },
    });
    rss.stop();
    const health = await fetch(`${service.url}/health`).then(
      (r) => r.status,
      () => 0,
    );
    const ready = await fetch(`${service.url}/health/ready`).then(
      (r) => r.status,
      () => 0,
    );
    const mem = rss.summary();
    log(`${setup}: ${report.requests} requests in ${Math.round(report.elapsedMs / 1000)} s (seed ${seed})`);
    for (const [route, t] of Object.entries(report.byRoute)) {
      const statuses = Object.entries(t.statuses)
        .map(([s, n]) => `${s}×${n}`)
        .join(' ');
      log(`  ${route.padEnd(44)} ${String(t.requests).padStart(6)}  ${statuses}`);
      for (const f of t.failures) log(`    ✖ ${f.problem}\n${f.request}\n    → ${f.answer}`);
    }
    log(
      `${setup}: 5xx ${report.fiveHundreds}, rule breaks ${report.failures}, /health ${health}, /health/ready ${ready}; ` +
        `RSS first ${mem.firstMb} MB, peak ${mem.peakMb} MB, last ${mem.lastMb} MB, second-half trend ${mem.secondHalfSlopeMbPerMin} MB/min`,
    );
    const errors = service.errors.filter((l) => !l.includes('JWKS_NOT_AVAILABLE'));
    if (errors.length > 0) log(`${setup}: the service logged errors:\n${errors.slice(0, 10).join('\n')}`);
    if (
      report.failures > 0 ||
      health !== 204 ||
      ready !== 204 ||
      exitedEarly !== undefined ||
      report.requests < operations.length * perRoute
    )
      failed = true;
    if (report.requests < operations.length * perRoute)
      log(`${setup}: stopped at the ${minutes}-minute bound`);
  } finally {
    rss.stop();
    stopping = exitedEarly === undefined;
    const code = await service.stop();
    if (exitedEarly === undefined && code !== 0) {
      log(`${setup}: the service exited with ${code} on SIGTERM`);
      failed = true;
    }
    if (exitedEarly !== undefined) {
      log(
        `${setup}: the service exited during the run (${exitedEarly}):\n${service.errors.slice(-20).join('\n')}`,
      );
      failed = true;
    }
    await db?.drop();
    await peers.close();
  }
}
log(failed ? 'FAILED' : 'passed: no 5xx, every error answer well-formed, the service healthy throughout');
process.exit(failed ? 1 : 0);
