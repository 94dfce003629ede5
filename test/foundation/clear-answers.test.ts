/**
 * Answers a newcomer tripped over (issue 21): each says what is wrong and what to do, and requests that
 * a reasonable client sends (an empty JSON body) are not refused. An empty upload is not labelled as the
 * image it claims to be, and the refresh token named in the query wins over the cookie.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { bearer, HS, HS_KEY, login, signUp } from '../auth/helpers.ts';
import { accessToken } from '../helpers/accounts.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { multipartBody } from '../helpers/multipart.ts';
import { hbpRules, userIdFor } from '../storage/helpers.ts';

describe('answers that name the problem and the fix', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp('pglite', { ...HS, RATE_LIMIT_ENABLED: false });
  });
  after(() => t.close());

  const me = (headers: Record<string, string>) =>
    t.app.inject({ method: 'POST', url: '/auth/token/revoke', headers });

  it('"Bearer abc" is told that abc is not a JWT, not to send "Bearer <token>"', async () => {
    const res = await me({ authorization: 'Bearer abc' });
    assert.equal(res.statusCode, 401);
    assert.match(
      res.json().message,
      /the bearer token is not a JWT \(three base64url parts separated by dots\)/,
    );
    assert.match(String(res.headers['www-authenticate']), /^Bearer error="invalid_token"/);
  });

  it('another scheme, or "Bearer" alone, is told so', async () => {
    const other = await me({ authorization: 'Token abc.def.ghi' });
    assert.match(other.json().message, /must be "Bearer <token>" \(another scheme, or no scheme, was sent\)/);
    const bare = await me({ authorization: 'Bearer' });
    assert.match(bare.json().message, /has "Bearer" but no token after it/);
  });

  it('a token of another issuer names both issuers', async () => {
    const s = await signUp(t);
    const now = Math.floor(t.clock.now().getTime() / 1000);
    const foreign = await new SignJWT({
      'https://hasura.io/jwt/claims': {
        'x-hasura-user-id': s.userId,
        'x-hasura-allowed-roles': ['user'],
        'x-hasura-default-role': 'user',
      },
    })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('other-service')
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .sign(new TextEncoder().encode(HS_KEY));
    const res = await me(bearer(foreign));
    assert.equal(res.statusCode, 401);
    assert.equal(
      res.json().message,
      "Invalid access token: access token issued by 'other-service', not by this service ('nhost').",
    );
  });

  it("a token signed with another key is told the signature does not match this service's key", async () => {
    const s = await signUp(t);
    const [h, p] = s.jwt.split('.') as [string, string];
    const res = await me(bearer(`${h}.${p}.${'A'.repeat(43)}`));
    assert.equal(res.statusCode, 401);
    assert.match(res.json().message, /signature does not match this service's key/);
  });

  it('an expired token is told to refresh', async () => {
    const s = await signUp(t);
    t.clock.advance(16 * 60_000);
    const res = await me(bearer(s.jwt));
    assert.match(res.json().message, /access token expired; get a new one from \/auth\/token\/refresh/);
  });

  it('POST /auth/mfa/generate accepts content-type: application/json with an empty body', async () => {
    const s = await signUp(t);
    const res = await t.app.inject({
      method: 'POST',
      url: '/auth/mfa/generate',
      headers: { ...bearer(s.jwt), 'content-type': 'application/json' },
      payload: '',
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.match(res.json().otp_secret, /^[A-Z2-7]+$/);
  });

  it('an empty JSON body on a route that needs fields names the missing field, as a bare POST does', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '',
    });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().code, 'VALIDATION');
  });

  it('a logout with the token in the query is not refused as cross-site, whatever cookie comes along', async () => {
    const s = await signUp(t);
    const other = setCookie(await login(t, { email: s.email, password: s.password }));
    const res = await t.app.inject({
      method: 'POST',
      url: `/auth/logout?refresh_token=${s.refreshToken}`,
      headers: { origin: 'https://evil.example' },
      cookies: { refresh_token: other },
    });
    assert.equal(res.statusCode, 204, res.body);
    assert.equal(res.headers['set-cookie'], undefined, 'the cookie of the other sign-in is left alone');
    const again = await t.app.inject({
      method: 'GET',
      url: `/auth/token/refresh?refresh_token=${s.refreshToken}`,
    });
    assert.equal(again.statusCode, 401, 'the sign-in named in the query has ended');
    const kept = await t.app.inject({
      method: 'GET',
      url: '/auth/token/refresh',
      cookies: { refresh_token: other },
    });
    assert.equal(kept.statusCode, 200, "the cookie's sign-in is still there");
  });
});

function setCookie(res: { cookies: { name: string; value: string }[] }): string {
  const c = res.cookies.find((x) => x.name === 'refresh_token');
  assert.ok(c, 'a refresh cookie was set');
  return c.value;
}

describe('storage answers that say why', () => {
  let t: TestApp;
  let admin: TestApp;
  const alice = userIdFor('alice');
  before(async () => {
    // HBP's rules: the empty uploads below go anonymously to /public.
    t = await buildTestApp('pglite', { ...HS, RATE_LIMIT_ENABLED: false, ...hbpRules() });
    admin = await buildTestApp('pglite', {
      ...HS,
      RATE_LIMIT_ENABLED: false,
      HASURA_GRAPHQL_ADMIN_SECRET: 'an-admin-secret-of-32-characters!',
    });
  });
  after(async () => {
    await t.close();
    await admin.close();
  });

  const upload = (app: TestApp, key: string, body: string | Buffer, headers: Record<string, string>) =>
    app.app.inject({ method: 'POST', url: `/storage/o/${key}`, payload: body, headers });

  it('a denial names the rule entry and the operation, and reads the same whether or not the file exists', async () => {
    const token = await accessToken(t, alice);
    const put = await upload(t, `user/${alice}/photo.txt`, 'hello', {
      ...bearer(token),
      'content-type': 'text/plain',
    });
    assert.equal(put.statusCode, 200, put.body);
    const existing = await t.app.inject({ method: 'GET', url: `/storage/o/user/${alice}/photo.txt` });
    const missing = await t.app.inject({ method: 'GET', url: `/storage/o/user/${alice}/nothing.txt` });
    assert.equal(existing.statusCode, 403);
    assert.equal(missing.statusCode, 403);
    assert.equal(
      existing.json().message,
      'Forbidden by the storage rules: the rules of path "/user/:userId/:fileId" (read) do not allow get to an anonymous caller (no access token was sent).',
    );
    assert.equal(missing.json().message, existing.json().message, 'existence is not revealed');
    const bob = await accessToken(t, userIdFor('bob'));
    const asBob = await t.app.inject({
      method: 'GET',
      url: `/storage/o/user/${alice}/photo.txt`,
      headers: bearer(bob),
    });
    assert.match(asBob.json().message, /do not allow get to this user\.$/);
    const nowhere = await upload(t, 'elsewhere/x.txt', 'x', { 'content-type': 'text/plain' });
    assert.equal(nowhere.statusCode, 403);
    assert.match(nowhere.json().message, /no path in the rules allows create here/);
  });

  it('revoke-token without the admin secret says the admin secret is needed, and that none is set', async () => {
    const token = await accessToken(t, alice);
    await upload(t, `user/${alice}/r.txt`, 'r', { ...bearer(token), 'content-type': 'text/plain' });
    const res = await t.app.inject({
      method: 'POST',
      url: `/storage/m/user/${alice}/r.txt`,
      payload: { action: 'revoke-token' },
      headers: bearer(token),
    });
    assert.equal(res.statusCode, 403);
    assert.match(res.json().message, /revoke-token needs the admin secret, and this server has none/);
    assert.doesNotMatch(res.json().message, /x-access-token/);

    const withSecret = (secret?: string) =>
      admin.app.inject({
        method: 'POST',
        url: `/storage/m/public/r.txt`,
        payload: { action: 'revoke-token' },
        headers: secret ? { 'x-admin-secret': secret } : {},
      });
    await upload(admin, 'public/r.txt', 'r', {
      'content-type': 'text/plain',
      'x-admin-secret': 'an-admin-secret-of-32-characters!',
    });
    assert.match((await withSecret()).json().message, /needs the admin secret in the x-admin-secret header/);
    assert.match((await withSecret('wrong')).json().message, /the x-admin-secret header sent is not it/);
    assert.equal((await withSecret('an-admin-secret-of-32-characters!')).statusCode, 200);
  });

  it('stores an empty upload, raw or multipart, as application/octet-stream whatever image type it claims', async () => {
    const raw = await upload(t, 'public/empty.png', Buffer.alloc(0), { 'content-type': 'image/png' });
    assert.equal(raw.statusCode, 200, raw.body);
    assert.equal(raw.json().ContentLength, 0);
    assert.equal(raw.json().ContentType, 'application/octet-stream', 'zero bytes are no PNG');
    const part = multipartBody([{ name: 'file', filename: 'empty.png', type: 'image/png', data: '' }]);
    const multi = await upload(t, 'public/empty-part.png', part.payload, part.headers);
    assert.equal(multi.statusCode, 200, multi.body);
    assert.equal(multi.json().ContentType, 'application/octet-stream');
    const text = await upload(t, 'public/empty.txt', Buffer.alloc(0), {
      'content-type': 'text/plain; charset=utf-8',
    });
    assert.equal(text.json().ContentType, 'text/plain; charset=utf-8', 'an empty text is still text');
    const got = await t.app.inject({ method: 'GET', url: '/storage/o/public/empty.png' });
    assert.equal(got.statusCode, 200);
    assert.equal(got.headers['content-type'], 'application/octet-stream');
    assert.equal(got.rawPayload.length, 0);
  });
});
