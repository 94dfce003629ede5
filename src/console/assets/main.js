// The console's shell: settings, the session, the address a link landed on, and the page router.

import { feedPage, sessionsPage } from './activity.js';
import { adminEmailsPage, adminReady, adminUserPage, adminUsersPage } from './admin.js';
import { api, onSession, restore, session } from './api.js';
import { describe, h } from './dom.js';
import { filesPage } from './files.js';
import {
  emailChangePage,
  mfaPage,
  outboxPage,
  resetPage,
  securityPage,
  sessionPage,
  signInPage,
  switchesPage,
} from './views.js';

const PAGES = {
  'sign-in': { title: 'Sign in', render: signInPage },
  session: { title: 'Session', render: sessionPage },
  security: { title: 'Security', render: securityPage },
  sessions: { title: 'Sessions', render: sessionsPage },
  feed: { title: 'Security feed', render: feedPage },
  files: { title: 'Files', render: filesPage },
  outbox: { title: 'Outbox', render: outboxPage },
  mfa: { title: 'Two-factor code', render: mfaPage },
  reset: { title: 'Reset password', render: resetPage },
  'email-change': { title: 'Confirm new email', render: emailChangePage },
  switches: { title: 'What is switched on', render: switchesPage },
  admin: { title: 'Users (admin)', render: adminUsersPage },
  'admin-user': { title: 'User (admin)', render: adminUserPage },
  'admin-emails': { title: 'Emails (admin)', render: adminEmailsPage },
};

/** Pages named in the navigation; `when` says whether the link is shown. */
const NAV = [
  { name: 'sign-in', label: 'Sign in', when: () => !session() },
  { name: 'session', label: 'Session', when: () => !!session() },
  { name: 'security', label: 'Security', when: () => !!session() },
  { name: 'sessions', label: 'Sessions', when: () => !!session() },
  { name: 'feed', label: 'Feed', when: () => !!session() },
  { name: 'files', label: 'Files', when: () => !!session() && ctx.settings.storage },
  { name: 'outbox', label: 'Outbox', when: () => ctx.settings.outbox },
  { name: 'switches', label: 'What is on', when: () => !!ctx.settings.flows },
  { name: 'admin', label: 'Admin', when: () => ctx.settings.adminSecret || !!ctx.settings.adminRole },
  { name: 'admin-emails', label: 'Emails', when: () => adminReady(ctx) },
];

const LINK_ERRORS = {
  INVALID_TICKET: 'That link is invalid, expired or already used.',
  INVALID_TOKEN: 'That sign-in link is invalid, expired or already used.',
};

let notice;
const ctx = {
  settings: {},
  /** Tickets handed over by the address a link landed on (kept out of the address bar). */
  pending: {},
  notice(text) {
    notice = text;
  },
  /** The notice to show once, as a status line, or null. */
  takeNotice() {
    const text = notice;
    notice = undefined;
    return text ? h('p', { class: 'notice', role: 'status' }, text) : null;
  },
  go(name) {
    if (location.hash === `#/${name}`) void render();
    else location.hash = `#/${name}`;
  },
  render: () => render(),
};

function currentPage() {
  const name = location.hash.replace(/^#\/?/, '');
  return PAGES[name] ? name : session() ? 'session' : 'sign-in';
}

function renderNav(active) {
  const nav = document.getElementById('nav');
  nav.replaceChildren(
    ...NAV.filter((n) => n.when()).map((n) =>
      h(
        'li',
        {},
        h('a', { href: `#/${n.name}`, 'aria-current': n.name === active ? 'page' : undefined }, n.label),
      ),
    ),
  );
  const who = document.getElementById('who');
  const s = session();
  who.textContent = s ? `Signed in as ${s.user.email ?? s.user.id}` : 'Signed out';
}

let rendering = 0;
let rendered = false;
async function render() {
  const name = currentPage();
  const ticket = ++rendering;
  renderNav(name);
  const main = document.getElementById('main');
  main.setAttribute('aria-busy', 'true');
  let content;
  try {
    content = await PAGES[name].render(ctx);
  } catch (err) {
    content = h(
      'div',
      { class: 'page' },
      h('h1', { tabindex: '-1' }, PAGES[name].title),
      h('p', { class: 'alert', role: 'alert' }, describe(err)),
    );
  }
  if (ticket !== rendering) return;
  main.replaceChildren(content);
  main.removeAttribute('aria-busy');
  document.title = `${PAGES[name].title} · Gatehouse console`;
  // A page that is one field to fill (the two-factor code) puts focus in it. Otherwise, after a change of
  // page, focus moves to its heading so keyboard and screen-reader users start there; the first page of a
  // visit leaves focus where the browser puts it (the top: the skip link comes first).
  const first = main.querySelector('[data-autofocus]');
  if (first) first.focus();
  else if (rendered) main.querySelector('h1')?.focus();
  rendered = true;
}

/** Emailed links land on `/console/?…`: take what they carry, then clean the address bar. */
function landing() {
  if (location.search === '') return undefined;
  const q = new URLSearchParams(location.search);
  let page;
  const ticket = q.get('ticket');
  if (ticket && q.get('type') === 'password-reset') {
    ctx.pending.resetTicket = ticket;
    page = 'reset';
  } else if (ticket && q.get('type') === 'email-change') {
    ctx.pending.emailTicket = ticket;
    page = 'email-change';
  } else if (ticket && q.get('mfa') === 'true') {
    ctx.pending.mfaTicket = ticket;
    page = 'mfa';
  } else if (q.get('signed_in') === 'true') {
    ctx.notice('Signed in by the emailed link.');
    page = 'session';
  } else if (q.has('error')) {
    ctx.notice(LINK_ERRORS[q.get('error')] ?? `The link did not work (${q.get('error')}).`);
    page = 'sign-in';
  }
  history.replaceState(null, '', `${location.pathname}${page ? `#/${page}` : location.hash}`);
  return page;
}

async function start() {
  // The skip link moves focus without touching the address (whose fragment names the page).
  document.querySelector('.skip')?.addEventListener('click', (event) => {
    event.preventDefault();
    document.getElementById('main')?.focus();
  });
  landing();
  try {
    ctx.settings = await api('GET', '/console/api/settings');
    await restore();
  } catch (err) {
    ctx.notice(describe(err));
  }
  onSession(() => renderNav(currentPage()));
  window.addEventListener('hashchange', render);
  await render();
  document.body.dataset.ready = 'true';
}

void start();
