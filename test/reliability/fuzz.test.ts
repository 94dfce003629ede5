/**
 * Fuzz, CI sample: every route of /openapi.json (and a few it does not list) gets requests generated
 * from its schema and mutated (test/helpers/fuzz.ts), on PGlite and PostgreSQL, in both configurations
 * of test/helpers/fuzz-target.ts, over a real socket. No answer may be a 5xx, every error answer has the
 * one error body with a catalogue code, and the service is healthy afterwards. The seed is fixed so a
 * failure reproduces; FUZZ_SEED and FUZZ_PER_ROUTE change it, and `npm run fuzz` is the long run
 * (docs/reliability.md).
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { opName } from '../helpers/fuzz.ts';
import {
  type FuzzReport,
  fetchOperations,
  HttpWorld,
  type Peers,
  runFuzz,
  SETUPS,
  startPeers,
} from '../helpers/fuzz-target.ts';

const SEED = Number(process.env['FUZZ_SEED'] ?? 20261125);
/** Per route, per configuration, per database. */
const PER_ROUTE: Record<keyof typeof SETUPS, number> = {
  open: Number(process.env['FUZZ_PER_ROUTE'] ?? 14),
  limited: Number(process.env['FUZZ_PER_ROUTE'] ?? 6),
};

for (const kind of dbKinds()) {
  for (const setup of Object.keys(SETUPS) as (keyof typeof SETUPS)[]) {
    describe(`fuzzing every route [${kind}, ${setup}, seed ${SEED}]`, () => {
      let peers: Peers;
      let t: TestApp;
      let base: string;
      let report: FuzzReport;
      /** What the service logged at error level (a 5xx's cause), with the JWKS 501 of HS keys left out. */
      const logged: string[] = [];
      const logger = pino(
        { level: 'error' },
        new Writable({
          write(line: Buffer, _enc, done) {
            if (!line.includes('JWKS_NOT_AVAILABLE')) logged.push(line.toString('utf8').slice(0, 3000));
            done();
          },
        }),
      );

      before(async () => {
        peers = await startPeers();
        t = await buildTestApp(kind, SETUPS[setup](peers), { log: logger });
        await t.app.listen({ host: '127.0.0.1', port: 0 });
        base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
        const world = new HttpWorld(base);
        for (let i = 0; i < 3; i++) await world.addUser();
        report = await runFuzz({
          base,
          operations: await fetchOperations(base),
          world,
          seed: SEED,
          perRoute: PER_ROUTE[setup],
          concurrency: 6,
          spreadClients: setup === 'limited',
          newUserEvery: 150,
        });
      });
      after(async () => {
        await t?.close();
        await peers?.close();
      });

      it('sent every route its requests and answered each of them', () => {
        assert.ok(Object.keys(report.byRoute).length >= 30, Object.keys(report.byRoute).join(', '));
        for (const [route, tally] of Object.entries(report.byRoute)) {
          assert.equal(tally.requests, PER_ROUTE[setup], route);
        }
      });

      it('answered no request with a 5xx, and every error with the error body of a catalogue code', () => {
        const failed = Object.entries(report.byRoute)
          .filter(([, tally]) => tally.failures.length > 0)
          .map(([route, tally]) =>
            [
              `${route}:`,
              ...tally.failures.map((f) => `  ${f.problem}\n  ${f.request}\n  → ${f.answer}`),
            ].join('\n'),
          );
        assert.equal(
          failed.length,
          0,
          `${report.failures} failures (seed ${SEED}):\n${failed.join('\n\n')}\n\nlogged:\n${logged.slice(0, 5).join('\n')}`,
        );
        assert.equal(report.fiveHundreds, 0);
      });

      if (setup === 'open') {
        it('reached the handlers (not only validation) on most routes', () => {
          // A sample that only ever met 400s, 413s and 415s would prove little.
          const deep = Object.entries(report.byRoute).filter(([, tally]) =>
            Object.keys(tally.statuses).some((s) => !['400', '413', '415'].includes(s)),
          );
          assert.ok(deep.length >= Object.keys(report.byRoute).length * 0.6, deep.map(([r]) => r).join(', '));
        });
      }

      it('is still healthy and ready afterwards', async () => {
        assert.equal((await fetch(`${base}/health`)).status, 204);
        assert.equal((await fetch(`${base}/health/ready`)).status, 204);
        const login = await fetch(`${base}/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': '10.255.255.1' },
          body: JSON.stringify({ email: 'nobody@example.com', password: 'wrong password' }),
        });
        assert.equal(login.status, 401, opName({ method: 'POST', path: '/auth/login' } as never));
      });
    });
  }
}
