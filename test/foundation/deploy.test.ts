/**
 * The deployment files (issue 21): they cannot be built or run here (no container engine), so what can
 * be checked is: the compose file and .env.example name every setting docs/deployment.md says production needs,
 * Hasura's JWT secret points at /auth/jwks, the Dockerfile keeps its promises, and Debian's
 * docker-compose accepts the file.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { describeSettings } from '../../src/config.ts';
import { tempDir } from '../helpers/app.ts';
import { REPO_ROOT } from '../helpers/process.ts';
import { runsHere } from '../helpers/requirements.ts';

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), 'utf8');

/** The settings named in the production table of docs/deployment.md. */
function productionSettings(): string[] {
  const doc = read('docs/deployment.md');
  const a = doc.indexOf('<!-- production-settings:start -->');
  const b = doc.indexOf('<!-- production-settings:end -->');
  assert.ok(a > 0 && b > a, 'docs/deployment.md has the production-settings table');
  const names = [...doc.slice(a, b).matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] as string);
  return [...new Set(names)];
}

interface Compose {
  services: Record<
    string,
    {
      environment?: Record<string, unknown>;
      user?: string;
      image?: string;
      build?: unknown;
      command?: string[];
      profiles?: string[];
      // `config` prints the long form: service name → { condition }.
      depends_on?: Record<string, unknown>;
      ports?: unknown[];
    }
  >;
}

describe('deployment files', () => {
  it('the production table of docs/deployment.md names real settings, and the compose file and .env.example set each one', () => {
    const names = productionSettings();
    assert.ok(names.length >= 15, `the table names the settings (${names.join(', ')})`);
    const known = new Set(describeSettings().flatMap((s) => [s.name, ...s.aliases]));
    assert.deepEqual(
      names.filter((n) => !known.has(n)),
      [],
      'every name in the table is a setting',
    );
    const compose = parse(read('docker-compose.yml')) as Compose;
    const env = compose.services['gatehouse']?.environment ?? {};
    assert.deepEqual(
      names.filter((n) => !(n in env)),
      [],
      'docker-compose.yml gives the gatehouse service each setting',
    );
    const example = read('.env.example');
    assert.deepEqual(
      names
        .filter((n) => n !== 'NODE_ENV' && n !== 'DATABASE_URL' && n !== 'S3_ENDPOINT')
        .filter((n) => !new RegExp(`^${n}=`, 'm').test(example)),
      [],
      '.env.example lists each setting the compose file takes from it',
    );
  });

  it('wires Hasura to Gatehouse: the JWT secret is the JWKS URL, the admin secret is shared', () => {
    const compose = parse(read('docker-compose.yml')) as Compose;
    const hasura = compose.services['hasura']?.environment ?? {};
    const secret = JSON.parse(String(hasura['HASURA_GRAPHQL_JWT_SECRET'])) as Record<string, string>;
    assert.equal(secret['jwk_url'], 'http://gatehouse:3000/auth/jwks');
    const variable = (v: unknown) => /^\$\{([A-Z_]+)/.exec(String(v))?.[1];
    assert.equal(variable(hasura['HASURA_GRAPHQL_ADMIN_SECRET']), 'HASURA_GRAPHQL_ADMIN_SECRET');
    assert.equal(
      variable(compose.services['gatehouse']?.environment?.['HASURA_GRAPHQL_ADMIN_SECRET']),
      'HASURA_GRAPHQL_ADMIN_SECRET',
    );
    for (const s of ['postgres', 'minio', 'gatehouse', 'hasura'])
      assert.ok(compose.services[s], `service ${s}`);
  });

  it('the Dockerfile builds in stages, runs node dist/main.js as a non-root user, and checks /health', () => {
    const dockerfile = read('Dockerfile');
    assert.ok((dockerfile.match(/^FROM /gm) ?? []).length >= 2, 'multi-stage');
    assert.match(dockerfile, /^USER node$/m);
    assert.match(dockerfile, /^CMD \["node", "dist\/main\.js"\]$/m);
    assert.match(dockerfile, /^HEALTHCHECK [\s\S]*\/health'/m);
    assert.match(read('docs/deployment.md'), /The image build is not exercised by CI/);
  });

  it('engines, the Dockerfile and CI name the same Node lines: 22 and 24, the image pinned to a 22 release', () => {
    const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
    assert.equal(pkg.engines.node, '^22 || ^24');
    const dockerfile = read('Dockerfile');
    const version = /^ARG NODE_VERSION=(\d+)\.(\d+)\.(\d+)$/m.exec(dockerfile);
    assert.ok(version, 'the Dockerfile pins Node to a full version');
    assert.equal(version[1], '22');
    const froms = dockerfile.match(/^FROM .*$/gm) ?? [];
    assert.deepEqual(
      froms.filter((f) => !/^FROM node:\$\{NODE_VERSION\}-/.test(f)),
      [],
      'every stage runs the pinned Node',
    );
    // CI installs the Dockerfile's release from npm and runs the suite on it (and on the machine's Node).
    assert.match(read('.ci/run'), /sed -n 's\/\^ARG NODE_VERSION=\/\/p' Dockerfile/);
  });

  it('pins every image it pulls to a release: no latest, no bare major', () => {
    const compose = parse(read('docker-compose.yml')) as Compose;
    const pulled = Object.entries(compose.services).filter(([, s]) => s.image && !s.build);
    assert.ok(pulled.length >= 5, 'postgres, minio, hasura, mailpit and the check are pulled');
    assert.deepEqual(
      pulled
        .filter(([, s]) => !/:(v?\d+\.\d+(\.\d+)?|RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z)$/.test(s.image ?? ''))
        .map(([name, s]) => `${name}: ${s.image}`),
      [],
      'each pulled image names a version or a dated release',
    );
  });

  if (runsHere('docker-compose', 'docker-compose config accepts docker-compose.yml')) {
    /** `docker-compose config` with only this env file (and PATH): what compose would run. */
    const composeConfig = (envFile: string, ...args: string[]) => {
      const run = spawnSync('docker-compose', ['--env-file', envFile, ...args, 'config'], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        env: { PATH: process.env['PATH'] ?? '' },
      });
      assert.equal(run.status, 0, run.stderr);
      return parse(run.stdout) as Compose;
    };

    /** Runs the check-env service's own command, with its environment, as the container would. */
    const checkEnv = (compose: Compose) => {
      const service = compose.services['check-env'];
      assert.ok(service?.command, 'the compose file has the check-env service');
      const [shell, flag, script] = service.command;
      assert.deepEqual([shell, flag], ['sh', '-c']);
      const environment = Object.fromEntries(
        Object.entries(service.environment ?? {}).map(([k, v]) => [k, String(v ?? '')]),
      );
      // `config` prints `$$` (compose's escape of a literal `$`) as written; the container sees `$`.
      return spawnSync('sh', ['-c', String(script).replaceAll('$$', '$')], {
        encoding: 'utf8',
        env: { PATH: process.env['PATH'] ?? '', ...environment },
      });
    };

    it('an unfilled .env is refused before any service starts, naming every missing setting at once', () => {
      const dir = tempDir('gatehouse-compose-');
      try {
        const compose = composeConfig(path.join(REPO_ROOT, '.env.example'));
        for (const name of ['postgres', 'minio', 'gatehouse', 'hasura'])
          assert.deepEqual(
            compose.services[name]?.depends_on?.['check-env'],
            { condition: 'service_completed_successfully' },
            `${name} waits for the check`,
          );
        const refused = checkEnv(compose);
        assert.equal(refused.status, 1, 'an unfilled .env.example is refused');
        // .env.example leaves these empty: all of them are named, not just the first.
        for (const name of [
          'POSTGRES_PASSWORD',
          'S3_SECRET_ACCESS_KEY',
          'COOKIE_SECRET',
          'MFA_ENCRYPTION_KEY',
          'HASURA_GRAPHQL_ADMIN_SECRET',
        ])
          assert.match(refused.stderr, new RegExp(`\\b${name}\\b`), `names ${name}`);
        assert.doesNotMatch(refused.stderr, /SERVER_URL|SMTP_HOST/, 'names only what is missing');

        const filled = read('.env.example').replace(/^([A-Z0-9_]+)=$/gm, '$1=placeholder-value');
        writeFileSync(path.join(dir, 'filled.env'), filled);
        const accepted = checkEnv(composeConfig(path.join(dir, 'filled.env')));
        assert.equal(accepted.status, 0, accepted.stderr);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('the dev profile runs Gatehouse in development with Mailpit, needing no .env at all', () => {
      const dir = tempDir('gatehouse-compose-');
      try {
        writeFileSync(path.join(dir, 'empty.env'), '');
        const compose = composeConfig(path.join(dir, 'empty.env'), '--profile', 'dev');
        const dev = compose.services['gatehouse-dev'];
        const mailpit = compose.services['mailpit'];
        assert.deepEqual(dev?.profiles, ['dev']);
        assert.deepEqual(mailpit?.profiles, ['dev']);
        assert.match(mailpit?.image ?? '', /^axllent\/mailpit:/);
        assert.equal(dev?.environment?.['NODE_ENV'], 'development');
        assert.equal(dev?.environment?.['SMTP_HOST'], 'mailpit');
        assert.ok(dev?.depends_on && 'mailpit' in dev.depends_on, 'starting gatehouse-dev starts Mailpit');
        assert.ok(
          !('check-env' in (dev?.depends_on ?? {})),
          'the dev service needs none of the .env secrets',
        );
        // Published on this machine only: development keys and the console are not for the network.
        for (const service of [dev, mailpit])
          for (const port of service?.ports ?? [])
            assert.match(String(port), /^127\.0\.0\.1:/, `${String(port)} binds the loopback address`);
        // The production services carry no profile, so `docker-compose up -d` still starts them.
        for (const name of ['postgres', 'minio', 'gatehouse', 'hasura', 'check-env'])
          assert.equal(compose.services[name]?.profiles, undefined, name);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
