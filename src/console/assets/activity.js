// The signed-in person's sessions (where they are signed in, with a button to end each) and their
// security feed (what happened to the account). Both read the service's own routes: GET /auth/sessions,
// DELETE /auth/sessions/{id}, GET /auth/security-events.
import { api, fresh, refresh, session } from './api.js';
import { describe, h, section } from './dom.js';

function page(title, intro, ...content) {
  return h(
    'div',
    { class: 'page' },
    h('h1', { tabindex: '-1' }, title),
    intro ? h('p', { class: 'intro' }, intro) : null,
    ...content,
  );
}

function signInFirst(title) {
  return page(title, 'Sign in first.', h('p', {}, h('a', { href: '#/sign-in' }, 'Sign in')));
}

const at = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

/** A User-Agent as a short name: the browser and system when recognisable, else the text cut short. */
function client(ua) {
  if (!ua) return 'Unknown client';
  const browser = [
    [/Edg\//, 'Edge'],
    [/OPR\//, 'Opera'],
    [/Firefox\//, 'Firefox'],
    [/Chrome\//, 'Chrome'],
    [/Safari\//, 'Safari'],
  ].find(([re]) => re.test(ua))?.[1];
  const system = [
    [/Android/, 'Android'],
    [/iPhone|iPad/, 'iOS'],
    [/Windows/, 'Windows'],
    [/Mac OS X/, 'macOS'],
    [/Linux/, 'Linux'],
  ].find(([re]) => re.test(ua))?.[1];
  if (browser) return system ? `${browser} on ${system}` : browser;
  return ua.length > 40 ? `${ua.slice(0, 40)}…` : ua;
}

const METHODS = {
  password: 'password',
  'magic-link': 'emailed link',
  mfa: 'password and code',
  anonymous: 'anonymous',
};
const method = (m) => (m ? (METHODS[m] ?? (m.startsWith('oauth:') ? m.slice(6) : m)) : 'unknown');

/** Where the person is signed in: one row per session, the current one marked, an "End" button on each. */
export async function sessionsPage(ctx) {
  if (!session()) return signInFirst('Sessions');
  await fresh();
  const notice = ctx.takeNotice();
  const status = h('p', { class: 'done', role: 'status' });
  const sessions = await api('GET', '/auth/sessions');
  const end = async (s, button) => {
    button.disabled = true;
    try {
      await api('DELETE', `/auth/sessions/${encodeURIComponent(s.id)}`);
      if (s.current) {
        // Its refresh token is gone too: refreshing finds it spent and signs this page out.
        await refresh();
        ctx.notice('This session was ended; you are signed out here.');
        ctx.go('sign-in');
        return;
      }
      ctx.notice(`The session on ${client(s.user_agent)} was ended. It is signed out at once.`);
      ctx.render();
    } catch (err) {
      status.textContent = describe(err);
      button.disabled = false;
    }
  };
  const rows = sessions.map((s) =>
    h(
      'tr',
      { class: s.current ? 'current' : undefined, 'data-session': s.id },
      h(
        'th',
        { scope: 'row' },
        client(s.user_agent),
        s.current ? h('span', { class: 'badge on' }, 'This device') : null,
      ),
      h('td', {}, s.ip ?? '—'),
      h('td', {}, method(s.sign_in_method)),
      h('td', {}, at(s.created_at)),
      h('td', {}, at(s.last_active_at)),
      h(
        'td',
        {},
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'aria-label': `End the session on ${client(s.user_agent)} begun ${at(s.created_at)}`,
            onclick: (event) => end(s, event.currentTarget),
          },
          'End',
        ),
      ),
    ),
  );
  return page(
    'Sessions',
    'Where your account is signed in. Ending a session signs that device out at once: its tokens stop working everywhere.',
    notice,
    section(
      `${sessions.length} session${sessions.length === 1 ? '' : 's'}`,
      h(
        'table',
        { class: 'switches sessions' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ...['Device', 'Address', 'Signed in with', 'Began', 'Last active', ''].map((t) =>
              h('th', { scope: 'col' }, t),
            ),
          ),
        ),
        h('tbody', {}, ...rows),
      ),
      status,
    ),
  );
}

const EVENTS = {
  sign_in: (d) => `Signed in (${method(d.method)})`,
  sign_in_failed: (d) => (d.reason === 'mfa_code' ? 'Wrong two-factor code' : 'Wrong password'),
  session_ended: (d) =>
    `${d.sessions?.length ?? 0} session${d.sessions?.length === 1 ? '' : 's'} ended (${String(d.reason ?? '').replaceAll('_', ' ')})`,
  password_changed: () => 'Password changed',
  password_reset: () => 'Password reset by emailed link',
  email_changed: (d) => (d.confirmed ? 'Email changed (confirmed by link)' : 'Email changed'),
  mfa_enabled: () => 'Two-factor sign-in turned on',
  mfa_disabled: () => 'Two-factor sign-in turned off',
  provider_linked: (d) => `${d.provider} linked`,
  provider_unlinked: (d) => `${d.provider} unlinked`,
  account_disabled: () => 'Account disabled by the operator',
};

/** The security feed, newest first, 25 at a time with a "Show older" button. */
export async function feedPage(ctx) {
  if (!session()) return signInFirst('Security feed');
  await fresh();
  const notice = ctx.takeNotice();
  const body = h('tbody', {});
  const status = h('p', { class: 'done', role: 'status' });
  const more = h('button', { type: 'button', class: 'secondary' }, 'Show older');
  let before;
  const load = async () => {
    more.disabled = true;
    try {
      const q = before ? `?limit=25&before=${encodeURIComponent(before)}` : '?limit=25';
      const events = await api('GET', `/auth/security-events${q}`);
      for (const e of events) {
        const describeEvent = EVENTS[e.type] ?? (() => e.type);
        body.append(
          h(
            'tr',
            { 'data-type': e.type },
            h('td', {}, at(e.created_at)),
            h('th', { scope: 'row' }, describeEvent(e.details ?? {})),
            h('td', {}, e.user_agent ? client(e.user_agent) : '—'),
            h('td', {}, e.ip ?? '—'),
          ),
        );
      }
      before = events.at(-1)?.id;
      more.hidden = events.length < 25;
      if (body.children.length === 0) status.textContent = 'Nothing yet.';
    } catch (err) {
      status.textContent = describe(err);
    } finally {
      more.disabled = false;
    }
  };
  more.addEventListener('click', load);
  await load();
  return page(
    'Security feed',
    'What happened to your account, newest first: sign-ins, wrong passwords, sessions ended, and changes to your password, email and two-factor sign-in.',
    notice,
    section(
      'Events',
      h(
        'table',
        { class: 'switches feed' },
        h(
          'thead',
          {},
          h('tr', {}, ...['When', 'What', 'Device', 'Address'].map((t) => h('th', { scope: 'col' }, t))),
        ),
        body,
      ),
      h('div', { class: 'actions compact' }, more),
      status,
    ),
  );
}
