/** The redaction pieces of the logger on their own; test/foundation/log-secrets.test.ts drives the flows. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorSerializer, redactText, redactUrl } from './logging.ts';

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
