/**
 * GET /openapi.json lists the routes the settings switch off too, each marked with the setting that turns
 * it on (`x-gatehouse-enabled: false`, `x-gatehouse-enabled-by`, a line of its description), while the
 * routes themselves stay unregistered: every marked operation answers 404. With the setting on, the same
 * operation is listed unmarked.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildTestApp, type TestApp } from '../helpers/app.ts';

interface Op {
  'x-gatehouse-enabled'?: boolean;
  'x-gatehouse-enabled-by'?: string;
  description?: string;
  summary?: string;
  security?: Record<string, string[]>[];
  requestBody?: unknown;
}
type Doc = { paths: Record<string, Record<string, Op>> };

const get = async (t: TestApp): Promise<Doc> => {
  const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(res.statusCode, 200);
  return res.json() as Doc;
};

/** The marked operations, as `METHOD /path` → the setting that enables it. */
function marked(doc: Doc): Map<string, Op> {
  const out = new Map<string, Op>();
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops))
      if (op['x-gatehouse-enabled'] === false) out.set(`${method.toUpperCase()} ${path}`, op);
  return out;
}

describe('switched-off routes in /openapi.json', () => {
  let off: TestApp;
  let doc: Doc;
  before(async () => {
    // The defaults, with storage switched off as well.
    off = await buildTestApp('pglite', { STORAGE_ENABLED: false });
    doc = await get(off);
  });
  after(() => off.close());

  it('are listed, each marked with the setting that turns it on, in a valid document', async () => {
    const ops = marked(doc);
    const expected: Record<string, string> = {
      'POST /auth/change-password/request': 'LOST_PASSWORD_ENABLED=true',
      'POST /auth/change-password/change': 'LOST_PASSWORD_ENABLED=true',
      'GET /auth/magic-link': 'MAGIC_LINK_ENABLED=true',
      'POST /auth/activate/resend': 'AUTO_ACTIVATE_NEW_USERS=false',
      'POST /auth/delete': 'ALLOW_USER_SELF_DELETE=true',
      'POST /auth/change-email/request': 'VERIFY_EMAILS=true',
      'POST /storage/o/{*}': 'STORAGE_ENABLED=true',
      'GET /storage/m/{*}': 'STORAGE_ENABLED=true',
    };
    for (const [name, setting] of Object.entries(expected)) {
      const op = ops.get(name);
      assert.ok(op, `${name} is listed and marked`);
      assert.equal(op['x-gatehouse-enabled-by'], setting, name);
      assert.ok(
        op.description?.startsWith(`Switched off here: set ${setting}.`),
        `${name}: ${op.description}`,
      );
      assert.ok(op.summary, `${name} keeps its summary (its own schema)`);
    }
    // Providers: the gate is "any provider"; the token route needs a setting more.
    assert.match(
      String(ops.get('GET /auth/providers/{provider}')?.['x-gatehouse-enabled-by']),
      /GITHUB_ENABLED=true/,
    );
    assert.match(
      String(ops.get('GET /auth/providers/{provider}/tokens')?.['x-gatehouse-enabled-by']),
      /GITHUB_ENABLED=true.* and PROVIDER_TOKENS_STORED=true$/,
    );
    // A signed-in route switched off is still documented as one.
    assert.deepEqual(ops.get('POST /auth/delete')?.security, [{ bearer: [] }]);
    // Routes that are on are not marked.
    assert.equal(doc.paths['/auth/login']?.['post']?.['x-gatehouse-enabled'], undefined);
    const result = await new Validator().validate(doc as never);
    assert.deepEqual(result.errors ?? [], []);
  });

  it('still answer 404, like any unknown path', async () => {
    const ops = marked(doc);
    assert.ok(ops.size >= 15, `${ops.size} switched-off operations`);
    for (const name of ops.keys()) {
      const [method, path] = name.split(' ') as [string, string];
      const url = path.replace('{provider}', 'github').replace('{*}', 'public/file.txt');
      const res = await off.app.inject({
        method: method as 'GET',
        url,
        headers: { authorization: 'Bearer not.a.token' },
        ...(method === 'GET' || method === 'DELETE' ? {} : { payload: {} }),
      });
      assert.equal(res.statusCode, 404, `${name} answered ${res.statusCode}: ${res.body}`);
      assert.equal(res.json().code, 'NOT_FOUND', name);
    }
  });

  it('are listed unmarked once their setting is on', async () => {
    const on = await buildTestApp('pglite', {
      LOST_PASSWORD_ENABLED: true,
      MAGIC_LINK_ENABLED: true,
      ALLOW_USER_SELF_DELETE: true,
    });
    try {
      const ops = marked(await get(on));
      for (const name of [
        'POST /auth/change-password/request',
        'POST /auth/change-password/change',
        'GET /auth/magic-link',
        'POST /auth/activate/resend',
        'POST /auth/delete',
        'POST /storage/o/{*}',
      ])
        assert.equal(ops.get(name), undefined, `${name} is on and unmarked`);
      const doc = await get(on);
      assert.ok(doc.paths['/auth/change-password/request']?.['post'], 'and still listed');
      const reset = await on.app.inject({
        method: 'POST',
        url: '/auth/change-password/request',
        payload: { email: 'nobody@example.com' },
      });
      assert.notEqual(reset.statusCode, 404, 'and served');
      // What stays off is still marked.
      assert.ok(ops.has('POST /auth/change-email/request'));
    } finally {
      await on.close();
    }
  });

  it('name both settings for a route inside a switched-off group', async () => {
    const noAuth = await buildTestApp('pglite', { AUTH_ENABLED: false });
    try {
      const ops = marked(await get(noAuth));
      assert.equal(ops.get('POST /auth/login')?.['x-gatehouse-enabled-by'], 'AUTH_ENABLED=true');
      assert.equal(
        ops.get('POST /auth/delete')?.['x-gatehouse-enabled-by'],
        'AUTH_ENABLED=true and ALLOW_USER_SELF_DELETE=true',
      );
      assert.ok(
        ops
          .get('POST /auth/delete')
          ?.description?.startsWith(
            'Switched off here: set AUTH_ENABLED=true and ALLOW_USER_SELF_DELETE=true.',
          ),
      );
      assert.equal(ops.get('POST /auth/mfa/totp')?.['x-gatehouse-enabled-by'], 'AUTH_ENABLED=true');
      const res = await noAuth.app.inject({ method: 'POST', url: '/auth/login', payload: {} });
      assert.equal(res.statusCode, 404);
    } finally {
      await noAuth.close();
    }
  });
});
