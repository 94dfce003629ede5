/**
 * The deployment files (issue 21): they cannot be built or run here (no container engine), so what can
 * be checked is: the compose file and .env.example name every setting the README says production needs,
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

/** The settings named in the README's production table. */
function productionSettings(): string[] {
  const readme = read('README.md');
  const a = readme.indexOf('<!-- production-settings:start -->');
  const b = readme.indexOf('<!-- production-settings:end -->');
  assert.ok(a > 0 && b > a, 'README has the production-settings table');
  const names = [...readme.slice(a, b).matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] as string);
  return [...new Set(names)];
}

interface Compose {
  services: Record<string, { environment?: Record<string, unknown>; user?: string }>;
}

describe('deployment files', () => {
  it('the README production table names real settings, and the compose file and .env.example set each one', () => {
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
    assert.match(read('README.md'), /The image build is not exercised by CI/);
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

  if (runsHere('docker-compose', 'docker-compose config accepts docker-compose.yml')) {
    it('docker-compose config accepts docker-compose.yml with .env.example filled in, and names an empty secret', () => {
      const dir = tempDir('gatehouse-compose-');
      try {
        const filled = read('.env.example').replace(/^([A-Z0-9_]+)=$/gm, '$1=placeholder-value');
        writeFileSync(path.join(dir, 'filled.env'), filled);
        const ok = spawnSync(
          'docker-compose',
          ['--env-file', path.join(dir, 'filled.env'), 'config', '--quiet'],
          {
            cwd: REPO_ROOT,
            encoding: 'utf8',
          },
        );
        assert.equal(ok.status, 0, ok.stderr);
        const empty = spawnSync(
          'docker-compose',
          ['--env-file', path.join(REPO_ROOT, '.env.example'), 'config', '--quiet'],
          {
            cwd: REPO_ROOT,
            encoding: 'utf8',
          },
        );
        assert.notEqual(empty.status, 0, 'an unfilled .env.example is refused');
        assert.match(empty.stderr, /set [A-Z_]+ in \.env/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
