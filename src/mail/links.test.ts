import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { configFrom } from '../config.ts';
import { appHome, appLink, withParams } from './links.ts';

describe('links', () => {
  it('adds parameters after an existing query and before a fragment', () => {
    assert.equal(
      withParams('https://a.test/p?x=1#top', { ticket: 'a b' }),
      'https://a.test/p?x=1&ticket=a+b#top',
    );
    assert.equal(withParams('https://a.test/p', { t: '1' }), 'https://a.test/p?t=1');
  });
  it('links app pages to redirect_to, else REDIRECT_URL_SUCCESS, else the console, else SERVER_URL', () => {
    const params = { ticket: 't', type: 'password-reset' as const };
    assert.equal(
      appLink(configFrom({ SERVER_URL: 'http://s.test/' }), undefined, params),
      'http://s.test/console/?ticket=t&type=password-reset',
      'outside production the development console completes the link',
    );
    assert.equal(
      appLink(configFrom({ SERVER_URL: 'http://s.test', CONSOLE_ENABLED: false }), undefined, params),
      'http://s.test?ticket=t&type=password-reset',
    );
    const c = configFrom({ SERVER_URL: 'http://s.test', REDIRECT_URL_SUCCESS: 'http://app.test/in' });
    assert.equal(appLink(c, undefined, params), 'http://app.test/in?ticket=t&type=password-reset');
    assert.equal(
      appLink(c, 'http://other.test/r', params),
      'http://other.test/r?ticket=t&type=password-reset',
    );
  });
  it('points emails that only open the app at REDIRECT_URL_SUCCESS, else the console, else SERVER_URL', () => {
    assert.equal(appHome(configFrom({ SERVER_URL: 'http://s.test/' })), 'http://s.test/console/');
    assert.equal(
      appHome(configFrom({ SERVER_URL: 'http://s.test', REDIRECT_URL_SUCCESS: 'http://app.test/in' })),
      'http://app.test/in',
    );
    assert.equal(
      appHome(configFrom({ SERVER_URL: 'http://s.test', CONSOLE_ENABLED: false })),
      'http://s.test',
    );
  });
});
