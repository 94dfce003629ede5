/**
 * The rules engine on its own: HBP's default rules as contract §8.6 describes them, the file format and
 * its start-up errors, and the evaluator's refusal of sandbox escapes.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  compileExpression,
  evaluate,
  LazyRecord,
  lazyValue,
  NOT_YET_KNOWN,
  RuleError,
  toValue,
  type Value,
} from './expression.ts';
import { compilePattern } from './matcher.ts';
import { HBP_RULES, loadRules, parseRules, type RuleInput, RulesFileError } from './rules.ts';

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'gatehouse-rules-'));

const alice = { 'user-id': 'alice', 'allowed-roles': ['user'], 'default-role': 'user' };
const meta = (token: string) => ({
  key: 'k',
  ContentType: 'image/png',
  ContentLength: 3,
  Metadata: { token },
});

function input(p: string, over: Partial<RuleInput> = {}): RuleInput {
  return { path: p, method: 'GET', query: {}, auth: undefined, resource: undefined, ...over };
}

describe('built-in default rules (HBP shipped rules.yaml with an owned /public)', () => {
  const rules = parseRules(
    // loadRules falls back to the defaults when the file is missing.
    '',
    'x',
  );
  const defaults = loadRules(path.join(tempDir(), 'missing.yaml'));

  it('reports where the rules came from', () => {
    assert.equal(defaults.source, 'built-in default rules');
    assert.equal(rules.decide('get', input('/public/x')).allowed, false);
  });

  it('lets the owner read, write, list and delete in their own folder', () => {
    assert.equal(
      defaults.decide('get', input('/user/alice/f.png', { auth: alice, resource: meta('t') })).allowed,
      true,
    );
    assert.equal(
      defaults.decide('create', input('/user/alice/f.png', { auth: alice, method: 'POST' })).allowed,
      true,
    );
    assert.equal(
      defaults.decide('update', input('/user/alice/f.png', { auth: alice, method: 'POST' })).allowed,
      true,
    );
    assert.equal(
      defaults.decide('delete', input('/user/alice/f.png', { auth: alice, resource: meta('t') })).allowed,
      true,
    );
    assert.equal(defaults.decide('list', input('/user/alice/', { auth: alice })).allowed, true);
  });

  it("refuses another user's folder and files, and anonymous callers", () => {
    const bob = { ...alice, 'user-id': 'bob' };
    assert.equal(
      defaults.decide('get', input('/user/alice/f.png', { auth: bob, resource: meta('t') })).allowed,
      false,
    );
    assert.equal(defaults.decide('create', input('/user/alice/f.png', { auth: bob })).allowed, false);
    assert.equal(
      defaults.decide('delete', input('/user/alice/f.png', { auth: bob, resource: meta('t') })).allowed,
      false,
    );
    assert.equal(defaults.decide('list', input('/user/alice/', { auth: bob })).allowed, false);
    assert.equal(defaults.decide('get', input('/user/alice/f.png', { resource: meta('t') })).allowed, false);
  });

  it('lets anyone read with the right ?token= and no one with a wrong or missing one', () => {
    const ok = input('/user/alice/f.png', { query: { token: 'secret' }, resource: meta('secret') });
    assert.equal(defaults.decide('get', ok).allowed, true);
    assert.equal(defaults.decide('get', { ...ok, query: { token: 'nope' } }).allowed, false);
    assert.equal(defaults.decide('get', { ...ok, query: {} }).allowed, false);
    // A token never grants writes.
    assert.equal(defaults.decide('delete', ok).allowed, false);
  });

  it('lets anyone read and list /public but write and delete only under /public/<own user id>/', () => {
    assert.equal(defaults.decide('get', input('/public/a/b.png', { resource: meta('t') })).allowed, true);
    assert.equal(defaults.decide('get', input('/public/a.png', { resource: meta('t') })).allowed, true);
    assert.equal(defaults.decide('list', input('/public/')).allowed, true);
    assert.equal(defaults.decide('list', input('/public/alice/')).allowed, true);
    for (const op of ['create', 'update', 'delete'] as const) {
      const at = (p: string, auth?: typeof alice) =>
        defaults.decide(op, input(p, { auth, resource: meta('t') }));
      assert.equal(at('/public/a.png').allowed, false, `anonymous ${op} at the top of /public`);
      assert.equal(at('/public/alice/a.png').allowed, false, `anonymous ${op} in a user's folder`);
      assert.equal(at('/public/a.png', alice).allowed, false, `${op} at the top of /public`);
      assert.equal(at('/public/bob/a.png', alice).allowed, false, `${op} in another user's folder`);
      assert.equal(at('/public/alice/a.png', alice).allowed, true, `${op} in one's own folder`);
      assert.equal(at('/public/alice/deep/a.png', alice).allowed, true, `${op} deeper in one's own folder`);
    }
  });

  it("keeps HBP's shipped rules (open /public) available as HBP_RULES for a rules file", () => {
    const hbp = parseRules(HBP_RULES, 'hbp');
    assert.equal(hbp.decide('create', input('/public/a.png')).allowed, true);
    assert.equal(hbp.decide('delete', input('/public/a.png', { resource: meta('t') })).allowed, true);
  });

  it('matches case-sensitively and refuses paths no entry answers', () => {
    assert.equal(
      defaults.decide('get', input('/USER/alice/f.png', { auth: alice, resource: meta('t') })).allowed,
      false,
    );
    assert.equal(defaults.decide('get', input('/Public/a.png', { resource: meta('t') })).allowed, false);
    assert.equal(defaults.decide('list', input('/user/')).allowed, false);
    assert.equal(
      defaults.decide('get', input('/user/alice/sub/f.png', { auth: alice, resource: meta('t') })).allowed,
      false,
    );
  });

  it('keeps folders and files apart: a file path does not match a folder pattern', () => {
    assert.equal(
      defaults.decide('get', input('/user/alice', { auth: alice, resource: meta('t') })).allowed,
      false,
    );
    assert.equal(defaults.decide('list', input('/user/alice/f.png/', { auth: alice })).allowed, false);
  });
});

describe('path patterns', () => {
  it('binds :name to one non-empty segment and * to the rest (variable 0)', () => {
    assert.deepEqual(
      { ...compilePattern('/user/:userId/:fileId').match('/user/a b/c.png') },
      { userId: 'a b', fileId: 'c.png' },
    );
    assert.equal(compilePattern('/user/:userId/:fileId').match('/user//c.png'), undefined);
    assert.deepEqual({ ...compilePattern('/public*').match('/public/a/b') }, { 0: '/a/b' });
    assert.deepEqual({ ...compilePattern('/public*').match('/public') }, { 0: '' });
  });

  it('treats regex characters in patterns literally', () => {
    assert.ok(compilePattern('/a.b/:x').match('/a.b/1'));
    assert.equal(compilePattern('/a.b/:x').match('/aXb/1'), undefined);
  });
});

describe('rules file', () => {
  it('accepts HBP function forms: a string body and {params, code}', () => {
    const rules = parseRules(
      `functions:
  inRole:
    params: [role]
    code: "return request.auth !== undefined && request.auth['allowed-roles'].indexOf(role) >= 0"
  big: 'return resource.size > 10;'
paths:
  /mod/:name:
    read: 'inRole("moderator")'
    create: 'big()'
`,
      'r.yaml',
    );
    const mod = { ...alice, 'allowed-roles': ['user', 'moderator'] };
    assert.equal(rules.decide('get', input('/mod/x', { auth: mod })).allowed, true);
    assert.equal(rules.decide('get', input('/mod/x', { auth: alice })).allowed, false);
    assert.equal(rules.decide('create', input('/mod/x', { resource: { size: 11 } })).allowed, true);
    assert.equal(rules.decide('create', input('/mod/x', { resource: { size: 1 } })).allowed, false);
  });

  it('reads the file at STORAGE_RULES_PATH when it exists', () => {
    const file = path.join(tempDir(), 'rules.yaml');
    writeFileSync(file, "paths:\n  /open/:f:\n    read: 'true'\n");
    const rules = loadRules(file);
    assert.equal(rules.source, file);
    assert.equal(rules.decide('get', input('/open/x')).allowed, true);
    assert.equal(rules.decide('get', input('/public/x')).allowed, false);
  });

  const bad: [string, string, RegExp][] = [
    ['invalid YAML', 'paths:\n  /a/:b:\n    read: [unclosed\n', /^f\.yaml:\d+: invalid YAML/],
    [
      'a syntax error in a rule',
      "paths:\n  /a/:b:\n    read: 'isOwner(('\n",
      /^f\.yaml:3: path "\/a\/:b" rule "read": syntax error/,
    ],
    ['an unknown action', "paths:\n  /a/:b:\n    reed: 'true'\n", /^f\.yaml:3: .*"reed": unknown action/],
    [
      'an unknown function',
      "paths:\n  /a/:b:\n    read: 'nope()'\n",
      /^f\.yaml:3: .*calls unknown function "nope"/,
    ],
    ['an undefined variable', "paths:\n  /a/:b:\n    read: 'c === 1'\n", /^f\.yaml:3: .*"c" is not defined/],
    [
      'a function body that is not return <expr>',
      "functions:\n  f: 'var x = 1'\npaths: {}\n",
      /^f\.yaml:2: function "f": the body must be/,
    ],
    [
      'functions calling each other in a loop',
      "functions:\n  f: 'return g()'\n  g: 'return f()'\n",
      /loop \(f → g → f\)/,
    ],
    [
      'a pattern not starting with /',
      "paths:\n  a/:b:\n    read: 'true'\n",
      /^f\.yaml:2: path "a\/:b": a path pattern must start/,
    ],
    ['an unknown section', 'rules: {}\n', /^f\.yaml:1: unknown section "rules"/],
    ['an assignment', "paths:\n  /a/:b:\n    read: 'request.auth = 1'\n", /^f\.yaml:3: .*syntax error/],
  ];
  for (const [what, text, message] of bad) {
    it(`stops the start on ${what}, naming the file, line and rule`, () => {
      assert.throws(
        () => parseRules(text, 'f.yaml'),
        (err: Error) => {
          assert.ok(err instanceof RulesFileError);
          assert.match(err.message, message);
          return true;
        },
      );
    });
  }
});

describe('expression evaluator', () => {
  const scope = (vars: Record<string, unknown> = {}, copy: (v: unknown) => Value = toValue) => ({
    vars: new Map<string, Value>(
      Object.entries({
        request: { path: '/a', method: 'GET', query: { token: 'x' }, auth: alice },
        resource: { Metadata: { token: 'x' }, size: 3 },
        ...vars,
      }).map(([k, v]) => [k, copy(v)]),
    ),
    functions: new Map(),
  });
  const run = (src: string) => evaluate(compileExpression(src), scope());

  it('supports what HBP rules use: literals, !, &&, ||, comparisons, members, allowed methods', () => {
    assert.equal(run("!!request.auth && request.auth['user-id'] === 'alice'"), true);
    assert.equal(run("request.auth['allowed-roles'].includes('user')"), true);
    assert.equal(run("request.auth['allowed-roles'].indexOf('admin') > -1"), false);
    assert.equal(run("request.path.startsWith('/a') && request.path.endsWith('a')"), true);
    assert.equal(run('request.query.token === resource.Metadata.token'), true);
    assert.equal(run('resource.size <= 3 ? "small" : "big"'), 'small');
    assert.equal(run('request.query.missing'), undefined);
    assert.equal(run("request.auth['allowed-roles'].length"), 1);
    assert.equal(run("'a' + 'b' == 'ab'"), true);
  });

  // Each payload must either fail to compile or fail to evaluate, and change nothing global.
  const escapes = [
    // notevil CVE-2021-23771 (prototype pollution through a function's prototype chain)
    "function fn() {}; var constructorProperty = Object.getOwnPropertyDescriptors(fn.__proto__).constructor; var properties = Object.values(constructorProperty); properties.pop(); properties.pop(); properties.pop(); var Func = properties.pop(); var x = new Func('return this'); x().process.mainModule.require('child_process').execSync('touch /tmp/pwned')",
    "''.sub.call.call(''.sub.constructor, 0, 'return process')()",
    "request.constructor.constructor('return process')()",
    "request['constructor']['constructor']('return process')()",
    "request.path.constructor.constructor('return this')()",
    "request.auth['__proto__'].polluted = 1",
    "request.auth.__proto__['polluted']",
    "resource['__pro' + 'to__']",
    "request['constr' + 'uctor']",
    "request.auth['allowed-roles'].constructor",
    "request.auth['allowed-roles'].map('x')",
    'request.path.toString()',
    "request.path.replace('a', 'b')",
    "request.path.indexOf.call(request.path, 'a')",
    'this',
    'globalThis.process',
    'process.exit(1)',
    'require("fs")',
    "eval('1')",
    "Function('return 1')()",
    'request.auth.prototype',
    '(() => process)()',
    'new Function("return 1")',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a template literal is the payload here.
    '`${process}`',
    'x = 1',
    'a; b',
    'typeof request',
  ];
  for (const payload of escapes) {
    it(`refuses ${payload.slice(0, 70)}`, () => {
      const before = Object.getOwnPropertyNames(Object.prototype).length;
      for (const copy of [toValue, lazyValue]) {
        assert.throws(() => {
          const expr = compileExpression(payload);
          evaluate(expr, scope({}, copy));
        }, RuleError);
      }
      assert.equal(Object.getOwnPropertyNames(Object.prototype).length, before);
      assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
    });
  }

  it('denies when a rule of the file contains an escape, instead of failing open', () => {
    const rules = parseRules(
      "functions:\n  evil: \"return request['constr' + 'uctor']\"\npaths:\n  /x/:f:\n    read: 'evil() || true'\n",
      'f.yaml',
    );
    const d = rules.decide('get', input('/x/a'));
    assert.equal(d.allowed, false);
  });

  it('denies on a runtime error such as reading a property of undefined', () => {
    const rules = parseRules(
      "paths:\n  /x/:f:\n    read: 'resource.Metadata.token === request.query.token'\n",
      'f.yaml',
    );
    assert.equal(rules.decide('get', input('/x/a')).allowed, false);
  });

  it('reuses the copy of a deeply frozen object, and copies anything that could change', () => {
    const frozen = Object.freeze({ 'user-id': 'a', roles: Object.freeze(['user']) });
    assert.equal(toValue(frozen), toValue(frozen));
    const shallow = Object.freeze({ roles: ['user'] });
    const first = toValue(shallow) as { roles: readonly string[] };
    shallow.roles.push('admin');
    assert.deepEqual((toValue(shallow) as { roles: readonly string[] }).roles, ['user', 'admin']);
    assert.deepEqual(first.roles, ['user']);
    let n = 0;
    const getter = Object.freeze(
      Object.defineProperty({}, 'n', {
        enumerable: true,
        get: () => {
          n += 1;
          return n;
        },
      }),
    );
    assert.notDeepEqual(toValue(getter), toValue(getter));
    const date = Object.freeze({ d: new Date(0) });
    toValue(date);
    date.d.setTime(1000);
    assert.deepEqual(toValue(date), { __proto__: null, d: new Date(1000).toISOString() });
  });

  it('reads lazily copied request and resource exactly as fully copied ones', () => {
    const deep: Record<string, unknown> = {};
    let cur = deep;
    for (let i = 0; i < 20; i++) {
      cur.next = { i };
      cur = cur.next as Record<string, unknown>;
    }
    const withGetter = Object.defineProperty({ plain: 1 }, 'computed', {
      enumerable: true,
      get: () => 'got',
    });
    const hidden = Object.defineProperty({}, 'secret', { enumerable: false, value: 'no' });
    const data = {
      request: {
        path: '/user/alice/x',
        method: 'GET',
        query: { token: 't', n: '3' },
        auth: Object.freeze({ 'user-id': 'alice', 'allowed-roles': Object.freeze(['user', 'me']) }),
      },
      resource: {
        Metadata: { token: 't' },
        size: NOT_YET_KNOWN,
        when: new Date(5),
        list: [{ a: 1 }, 'x'],
        deep,
        withGetter,
        hidden,
        big: 10n,
        fn: () => 1,
        ['__proto__']: 'x',
      },
    };
    const eager = {
      vars: new Map<string, Value>(Object.entries(data).map(([k, v]) => [k, toValue(v)])),
      functions: new Map(),
    };
    const lazy = {
      vars: new Map<string, Value>(Object.entries(data).map(([k, v]) => [k, lazyValue(v)])),
      functions: new Map(),
    };
    assert.ok(lazy.vars.get('resource') instanceof LazyRecord);
    const shape = (v: Value): unknown =>
      v instanceof LazyRecord || (typeof v === 'object' && v !== null && !Array.isArray(v))
        ? 'object'
        : Array.isArray(v)
          ? v.map(shape)
          : v;
    const outcome = (scope: typeof eager, src: string) => {
      try {
        return { value: shape(evaluate(compileExpression(src), scope)) };
      } catch (err) {
        return { error: `${(err as Error).name}: ${(err as Error).message}` };
      }
    };
    for (const src of [
      "request.auth['user-id'] === 'alice'",
      "request.auth['allowed-roles'].includes('me')",
      'request.auth === request.auth',
      'request.query === request.query',
      'request.query.token === resource.Metadata.token',
      'request.query.missing',
      'request.query.n < 4',
      'resource.size',
      'resource.size > 3',
      'resource.when',
      'resource.list',
      'resource.list[0]',
      'resource.list[0].a',
      'resource.list.length',
      'resource.deep.next.next.next.i',
      'resource.deep.next.next.next.next.next.next.next.next.next.next.next.next.next.next.next',
      'resource.deep.next.next.next.next.next.next.next.next.next.next.next.next.next.next.next.next',
      'resource.withGetter.computed',
      'resource.hidden.secret',
      'resource.big',
      'resource.fn',
      "resource['__proto__']",
      "resource['constructor']",
      'resource.Metadata.token.length',
      'resource.Metadata.includes("t")',
      'resource.nothing.at.all',
      'resource.Metadata + "x"',
      'resource.Metadata == resource.Metadata',
      '!resource',
      '[resource.Metadata.token, request.method]',
      'request ? 1 : 2',
    ]) {
      assert.deepEqual(outcome(lazy, src), outcome(eager, src), src);
    }
  });

  it('gives rule data no prototype to reach', () => {
    const v = toValue({ a: { b: [1] } }) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), null);
    assert.ok(Object.isFrozen(v));
  });
});
