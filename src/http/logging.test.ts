/** The redaction pieces of the logger on their own; test/foundation/log-secrets.test.ts drives the flows. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  createLogger,
  errorSerializer,
  redactLogObject,
  redactText,
  redactUrl,
  SHOWN_ON_PURPOSE,
} from './logging.ts';

describe('redactUrl', () => {
  it('replaces the values of secret-bearing parameters and keeps the rest as sent', () => {
    assert.equal(
      redactUrl('/auth/token/refresh?refresh_token=abc'),
      '/auth/token/refresh?refresh_token=[redacted]',
    );
    assert.equal(
      redactUrl('/auth/magic-link?action=log-in&token=t0k&redirect_to=http%3A%2F%2Fapp'),
      '/auth/magic-link?action=log-in&token=[redacted]&redirect_to=http%3A%2F%2Fapp',
    );
    assert.equal(
      redactUrl('/auth/providers/github/callback?code=c&state=s&oauth_token=o&oauth_verifier=v'),
      '/auth/providers/github/callback?code=[redacted]&state=[redacted]&oauth_token=[redacted]&oauth_verifier=[redacted]',
    );
    assert.equal(
      redactUrl('/storage/o/a.png?w=10&token=x&f=webp'),
      '/storage/o/a.png?w=10&token=[redacted]&f=webp',
    );
    assert.equal(redactUrl('/health'), '/health');
  });

  it('sees through case and percent-encoding in names, and treats an undecodable name as secret', () => {
    assert.equal(redactUrl('/x?Refresh_Token=a'), '/x?Refresh_Token=[redacted]');
    assert.equal(redactUrl('/x?%74icket=a'), '/x?%74icket=[redacted]');
    assert.equal(redactUrl('/x?%E0%A4%A=a&b=c'), '/x?%E0%A4%A=[redacted]&b=c');
    assert.equal(redactUrl('/x?ticket=a&ticket=b'), '/x?ticket=[redacted]&ticket=[redacted]');
    assert.equal(
      redactUrl('/x?new_password=a&client_secret=b'),
      '/x?new_password=[redacted]&client_secret=[redacted]',
    );
  });
});

describe('share link ids in paths', () => {
  it('replaces the id of a share link in its download and revocation URLs, wherever the prefix sits', () => {
    const id = 'AbCdEfGhIjKlMnOpQrStUvWxYz012-_9';
    assert.equal(redactUrl(`/storage/s/${id}`), '/storage/s/[redacted]');
    assert.equal(redactUrl(`/storage/s/${id}?w=10&token=t`), '/storage/s/[redacted]?w=10&token=[redacted]');
    assert.equal(redactUrl(`/storage/s/${id}/more`), '/storage/s/[redacted]/more');
    assert.equal(redactUrl(`/api/storage/shares/${id}`), '/api/storage/shares/[redacted]');
    assert.equal(redactUrl('/storage/shares'), '/storage/shares');
    assert.equal(redactUrl('/storage/o/user/a.txt'), '/storage/o/user/a.txt');
  });

  it('replaces it in free text too (a message quoting the URL)', () => {
    const id = 'ZZZZqqqqWWWWeeeeRRRRttttYYYYuuuu';
    assert.equal(
      redactText(`GET http://host/storage/s/${id} failed`),
      'GET http://host/storage/s/[redacted] failed',
    );
    const line: string[] = [];
    const log = createLogger('info', { write: (s: string) => line.push(s) });
    log.info(`Route GET:/storage/s/${id}/x not found`);
    log.info({ url: `/storage/shares/${id}` }, 'deleting');
    assert.equal(line.length, 2);
    assert.ok(!line.join('').includes(id));
  });
});

describe('errors in logs', () => {
  it('keep type, message, code and stack, without what was sent, and scrub URLs in the message', () => {
    const err = Object.assign(new Error('GET https://idp/cb?code=SECRET1&x=1 failed'), {
      code: 'E_UPSTREAM',
      config: { headers: { authorization: 'Bearer SECRET2' } },
      response: { data: 'SECRET3' },
      body: { password: 'SECRET4' },
      params: ['SECRET5'],
    });
    const out = errorSerializer(err) as Record<string, unknown>;
    assert.equal(out['code'], 'E_UPSTREAM');
    assert.equal(out['type'], 'Error');
    assert.match(String(out['message']), /code=\[redacted\]&x=1 failed/);
    assert.doesNotMatch(JSON.stringify(out), /SECRET/);
  });

  it('scrubs secret name=value pairs in free text', () => {
    assert.equal(
      redactText('see ?ticket=abc and password=hunter2 now'),
      'see ?ticket=[redacted] and password=[redacted] now',
    );
  });
});

describe('one redaction for every line', () => {
  const lineOf = (write: (log: ReturnType<typeof createLogger>) => void) => {
    const out: string[] = [];
    const log = createLogger('trace', { write: (s: string) => out.push(s) });
    write(log);
    return out.join('');
  };

  it('removes credential headers and secret fields at any depth, in any object', () => {
    const text = lineOf((log) =>
      log.trace(
        {
          busboyOptions: {
            headers: {
              authorization: 'Bearer SECRET1',
              cookie: 'refresh_token=SECRET2',
              'X-Hasura-Admin-Secret': 'SECRET3',
              referer: 'https://app.test/reset?ticket=SECRET4&lang=en',
              'content-type': 'multipart/form-data',
            },
          },
          deep: { a: { b: { c: { query: { refresh_token: 'SECRET5', password: 'SECRET6' } } } } },
          list: [{ 'set-cookie': ['a=SECRET7'] }],
          rawHeaders: ['Host', 'x', 'Authorization', 'Bearer SECRET8'],
          head: 'HTTP/1.1 200 OK\r\nSet-Cookie: refresh_token=SECRET9\r\n\r\n',
          url: new URL('https://idp.test/cb?code=SECRET10&x=1'),
        },
        'Providing options to busboy',
      ),
    );
    assert.doesNotMatch(text, /SECRET/);
    const line = JSON.parse(text);
    assert.equal(line.busboyOptions.headers['content-type'], 'multipart/form-data', 'the rest is kept');
    assert.equal(line.busboyOptions.headers.referer, 'https://app.test/reset?ticket=[redacted]&lang=en');
    assert.equal(line.rawHeaders[1], 'x');
  });

  it('scrubs the message, an error logged alone, and the bindings of a child logger', () => {
    const text = lineOf((log) => {
      log.info('GET /auth/activate?ticket=SECRET1 answered');
      log.error(new Error('fetch https://idp.test/token?client_secret=SECRET2 failed'));
      log.error({ err: new Error('fetch https://idp.test/cb?code=SECRET4 failed') });
      log.child({ headers: { cookie: 'SECRET3' } }).info('child');
    });
    assert.doesNotMatch(text, /SECRET/);
    assert.match(text, /ticket=\[redacted\] answered/);
  });

  it("keeps an error's code, and survives cycles and very deep values", () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic['self'] = cyclic;
    let deep: Record<string, unknown> = { token: 'SECRET1' };
    for (let i = 0; i < 30; i++) deep = { next: deep };
    const text = lineOf((log) =>
      log.warn({ err: Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }), cyclic, deep }, 'x'),
    );
    assert.doesNotMatch(text, /SECRET/);
    const line = JSON.parse(text);
    assert.equal(line.err.code, 'ECONNREFUSED');
    assert.equal(line.cyclic.self, '[circular]');
  });

  it('returns the same object when nothing is secret (no copy on the hot path)', () => {
    const obj = { responseTime: 1.5, nested: { status: 200, path: '/health' }, list: ['a', 'b'] };
    assert.equal(redactLogObject(obj), obj);
  });

  it('keeps the free text of a line marked as shown on purpose (the development outbox), not its secret fields', () => {
    const text = lineOf((log) =>
      log.info(
        { [SHOWN_ON_PURPOSE]: true, link: 'http://x/auth/activate?ticket=T1', password: 'SECRET1' },
        'its link: http://x/auth/activate?ticket=T1',
      ),
    );
    assert.doesNotMatch(text, /SECRET/);
    assert.equal(JSON.parse(text).link, 'http://x/auth/activate?ticket=T1');
    assert.match(JSON.parse(text).msg, /ticket=T1/);
  });
});
