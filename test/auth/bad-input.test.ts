/**
 * Bad input on every auth route: missing body, malformed JSON, wrong types, unknown fields, a 1 MB string,
 * an invalid email, a non-boolean cookie. Each answers 400 naming the field, and nothing changes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { dbKinds } from '../helpers/db.ts';
import { bearer, HS, signUp, snapshot } from './helpers.ts';

const HUGE = 'x'.repeat(1_000_000);
const WRONG_TYPES: unknown[] = [123, true, null, ['a'], { a: 1 }];

interface Case {
  name: string;
  method: 'GET' | 'POST';
  url: string;
  payload?: unknown;
  raw?: string;
  /** Expected message (exact) or pattern. */
  message: string | RegExp;
}

interface BodyRoute {
  url: string;
  valid: Record<string, unknown>;
  /** Field → the type word in the message. */
  fields: Record<string, string>;
  emails?: string[];
  cookie?: boolean;
  required?: string;
}

function bodyCases(r: BodyRoute): Case[] {
  const cases: Case[] = [];
  const post = (name: string, payload: unknown, message: string | RegExp): Case => ({
    name,
    method: 'POST',
    url: r.url,
    payload,
    message,
  });
  if (r.required) {
    cases.push({ name: 'missing body', method: 'POST', url: r.url, message: `"${r.required}" is required` });
  }
  cases.push({
    name: 'malformed JSON',
    method: 'POST',
    url: r.url,
    raw: '{"email": ',
    message: 'The request body is not valid JSON.',
  });
  cases.push(post('a JSON array body', [r.valid], 'The request body must be of type object'));
  cases.push(post('an unknown field', { ...r.valid, surprise: 1 }, '"surprise" is not allowed'));
  for (const [field, type] of Object.entries(r.fields)) {
    for (const wrong of WRONG_TYPES) {
      const sameType =
        (type === 'object' && wrong !== null && typeof wrong === 'object' && !Array.isArray(wrong)) ||
        (type === 'array' && Array.isArray(wrong)) ||
        (type === 'boolean' && typeof wrong === 'boolean');
      if (sameType) continue;
      cases.push(
        post(
          `${field} = ${JSON.stringify(wrong)}`,
          { ...r.valid, [field]: wrong },
          new RegExp(`^"${field}(\\.[a-z_]+)?" `),
        ),
      );
    }
    if (type === 'string') {
      cases.push(post(`${field} of 1 MB`, { ...r.valid, [field]: HUGE }, new RegExp(`^"${field}" `)));
    }
  }
  for (const field of r.emails ?? []) {
    for (const bad of ['not-an-email', 'a@b', 'a@b.c', '@example.com', 'a b@example.com']) {
      cases.push(post(`${field} = ${bad}`, { ...r.valid, [field]: bad }, `"${field}" must be a valid email`));
    }
  }
  if (r.cookie) {
    for (const bad of ['true', 'yes', 1, null]) {
      cases.push(
        post(`cookie = ${JSON.stringify(bad)}`, { ...r.valid, cookie: bad }, '"cookie" must be a boolean'),
      );
    }
  }
  return cases;
}

const ROUTES: BodyRoute[] = [
  {
    url: '/auth/register',
    valid: { email: 'new.person@example.com', password: 'long enough' },
    fields: {
      email: 'string',
      password: 'string',
      cookie: 'boolean',
      user_data: 'object',
      register_options: 'object',
    },
    emails: ['email'],
    cookie: true,
    required: 'email',
  },
  {
    url: '/auth/login',
    valid: { email: 'new.person@example.com', password: 'long enough' },
    fields: { email: 'string', password: 'string', cookie: 'boolean' },
    emails: ['email'],
    cookie: true,
    required: 'email',
  },
  { url: '/auth/logout?refresh_token=abc', valid: {}, fields: { all: 'boolean' } },
  { url: '/auth/token/revoke', valid: {}, fields: {} },
  {
    url: '/auth/change-password',
    valid: { old_password: 'long enough', new_password: 'another one' },
    fields: { old_password: 'string', new_password: 'string' },
    required: 'new_password',
  },
  {
    url: '/auth/change-email',
    valid: { new_email: 'other@example.com' },
    fields: { new_email: 'string' },
    emails: ['new_email'],
    required: 'new_email',
  },
  { url: '/auth/delete', valid: {}, fields: {} },
];

const QUERY_CASES: Case[] = [
  { name: 'no ticket', method: 'GET', url: '/auth/activate', message: '"ticket" is required' },
  {
    name: 'a ticket that is not a uuid',
    method: 'GET',
    url: '/auth/activate?ticket=abc',
    message: '"ticket" must be a valid uuid',
  },
  {
    name: 'a 1 MB ticket',
    method: 'GET',
    url: `/auth/activate?ticket=${'a'.repeat(100_000)}`,
    message: /^"ticket" /,
  },
  {
    name: 'a non-boolean cookie',
    method: 'GET',
    url: '/auth/activate?ticket=3f2b1c9e-8f6d-4a1b-9c7e-2d5f8a1b3c4d&cookie=yes',
    message: '"cookie" must be a boolean',
  },
  {
    name: 'an unknown parameter',
    method: 'GET',
    url: '/auth/activate?ticket=3f2b1c9e-8f6d-4a1b-9c7e-2d5f8a1b3c4d&x=1',
    message: '"x" is not allowed',
  },
  {
    name: 'an unknown refresh parameter',
    method: 'GET',
    url: '/auth/token/refresh?refresh_token=a&x=1',
    message: '"x" is not allowed',
  },
  {
    name: 'an oversized refresh token',
    method: 'GET',
    url: `/auth/token/refresh?refresh_token=${'a'.repeat(5000)}`,
    message: /^"refresh_token" length/,
  },
  {
    name: 'an oversized logout token',
    method: 'POST',
    url: `/auth/logout?refresh_token=${'a'.repeat(5000)}`,
    payload: {},
    message: /^"refresh_token" length/,
  },
];

for (const kind of dbKinds()) {
  describe(`bad input on auth routes [${kind}]`, () => {
    let t: TestApp;
    let jwt: string;
    before(async () => {
      t = await buildTestApp(kind, {
        ...HS,
        RATE_LIMIT_ENABLED: false,
        ALLOW_USER_SELF_DELETE: true,
        REDIRECT_URL_SUCCESS: 'https://app.example.com/',
      });
      jwt = (await signUp(t, 'existing.person@example.com', 'long enough')).jwt;
    });
    after(() => t.close());

    const all = [...ROUTES.flatMap((r) => bodyCases(r)), ...QUERY_CASES];
    it(`has a case list covering every route (${all.length} cases)`, () => {
      assert.ok(all.length > 100);
    });

    for (const c of all) {
      it(`${c.method} ${c.url.split('?')[0]} answers 400 to ${c.name} and changes nothing`, async () => {
        const before = await snapshot(t);
        const res = await t.app.inject({
          method: c.method,
          url: c.url,
          headers: { ...bearer(jwt), ...(c.raw !== undefined ? { 'content-type': 'application/json' } : {}) },
          payload: (c.raw ?? c.payload) as never,
        });
        assert.equal(res.statusCode, 400, `${res.statusCode} ${res.body.slice(0, 300)}`);
        const body = res.json();
        assert.equal(body.statusCode, 400);
        assert.equal(body.error, 'Bad Request');
        if (typeof c.message === 'string') assert.equal(body.message, c.message);
        else assert.match(body.message, c.message);
        assert.equal(await snapshot(t), before);
      });
    }

    it('accepts a bare POST on routes without required fields', async () => {
      const s = await signUp(t);
      const res = await t.app.inject({ method: 'POST', url: '/auth/token/revoke', headers: bearer(s.jwt) });
      assert.equal(res.statusCode, 204);
    });
  });
}
