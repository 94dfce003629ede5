// The admin pages: find a user, open them, change roles and state, end their sessions, make or send a
// link, browse their files, and see the email outbox. Everything goes through the admin API (/admin),
// with the admin secret (kept in this tab's sessionStorage only and sent as the x-hasura-admin-secret
// header, never in an address) or with the signed-in session when its roles include ADMIN_ROLE. Files are
// read through the storage routes, which bypass their rules for the admin secret only.
import { ApiError, api, fresh, session, storagePath } from './api.js';
import { describe, field, form, h, section, size } from './dom.js';

const SECRET_KEY = 'gatehouse.admin-secret';

function secret() {
  try {
    return sessionStorage.getItem(SECRET_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

function setSecret(value) {
  try {
    if (value) sessionStorage.setItem(SECRET_KEY, value);
    else sessionStorage.removeItem(SECRET_KEY);
  } catch {
    // A browser that refuses storage: the pages ask again.
  }
}

/** Whether the signed-in session carries ADMIN_ROLE (the service checks it again on every call). */
function adminByRole(ctx) {
  const role = ctx.settings.adminRole;
  const claims = session()?.claims;
  if (!role || !claims) return false;
  const hasura = Object.values(claims).find(
    (v) => v && typeof v === 'object' && 'x-hasura-allowed-roles' in v,
  );
  return Array.isArray(hasura?.['x-hasura-allowed-roles']) && hasura['x-hasura-allowed-roles'].includes(role);
}

/** Whether the admin pages can call the admin API now. */
export function adminReady(ctx) {
  return !!secret() || adminByRole(ctx);
}

/** A call to the admin API (or, with `path` under /storage, to storage) as the administrator. */
async function adminApi(method, path, body) {
  const s = secret();
  if (s) return api(method, path, body, { 'x-hasura-admin-secret': s, 'x-admin-secret': s });
  // The session's access token travels in its cookie: renewed first when it is about to expire.
  await fresh();
  return api(method, path, body);
}

/** The user the admin opened last (kept out of the address bar). */
let openUser;
/** The last search, so that "Back to the list" shows it again. */
let lastSearch = '';

function page(title, intro, ...content) {
  return h(
    'div',
    { class: 'page' },
    h('h1', { tabindex: '-1' }, title),
    intro ? h('p', { class: 'intro' }, intro) : null,
    ...content,
  );
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : '—';
}

function badge(on, yes, no) {
  return h('span', { class: `badge ${on ? 'on' : 'off'}` }, on ? yes : no);
}

/** How the admin signs in to these pages: the admin secret, or their session's ADMIN_ROLE. */
function adminSignIn(ctx) {
  const byRole = adminByRole(ctx);
  return section(
    'Administrator',
    secret()
      ? h(
          'div',
          {},
          h('p', {}, 'Using the admin secret (kept in this tab only, until you close it or forget it here).'),
          h(
            'div',
            { class: 'actions compact' },
            h(
              'button',
              {
                type: 'button',
                class: 'secondary',
                onclick: () => {
                  setSecret(undefined);
                  ctx.render();
                },
              },
              'Forget the admin secret',
            ),
          ),
        )
      : h(
          'div',
          {},
          byRole
            ? h('p', {}, `Your session has the role ${ctx.settings.adminRole}: the admin pages use it.`)
            : null,
          form(
            { 'aria-label': 'Admin secret' },
            [
              field(
                'Admin secret',
                { name: 'secret', type: 'password', autocomplete: 'off', required: true },
                'HASURA_GRAPHQL_ADMIN_SECRET. Sent in a header only; a wrong one counts as a guess.',
              ),
            ],
            'Use the admin secret',
            async (v) => {
              await api('GET', '/admin/users?limit=1', undefined, { 'x-hasura-admin-secret': v.secret });
              setSecret(v.secret);
              ctx.render();
            },
          ),
        ),
  );
}

function userRow(ctx, u) {
  return h(
    'tr',
    {},
    h(
      'th',
      { scope: 'row' },
      h(
        'a',
        {
          href: '#/admin-user',
          onclick: (event) => {
            event.preventDefault();
            openUser = u.id;
            ctx.go('admin-user');
          },
        },
        u.email ?? (u.anonymous ? '(anonymous)' : '(no email)'),
      ),
    ),
    h('td', {}, u.disabled ? badge(false, '', 'Disabled') : u.active ? badge(true, 'Active', '') : 'Pending'),
    h('td', {}, u.roles.join(', ')),
    h('td', {}, when(u.created_at)),
  );
}

/** Find a user by email (any part of it), a page at a time. */
export async function adminUsersPage(ctx) {
  if (!adminReady(ctx))
    return page(
      'Users',
      'The admin pages need the admin secret, or a session whose roles include ADMIN_ROLE.',
      adminSignIn(ctx),
    );
  const rows = h('tbody', {});
  const more = h('div', { class: 'actions compact' });
  const status = h('p', { class: 'done', role: 'status' });
  const load = async (email, cursor) => {
    const q = new URLSearchParams({ limit: '20' });
    if (email) q.set('email', email);
    if (cursor) q.set('cursor', cursor);
    const res = await adminApi('GET', `/admin/users?${q}`);
    if (!cursor) rows.replaceChildren();
    rows.append(...res.users.map((u) => userRow(ctx, u)));
    status.textContent =
      rows.children.length === 0 ? 'No user matches.' : `${rows.children.length} user(s) shown.`;
    more.replaceChildren(
      res.next_cursor
        ? h(
            'button',
            { type: 'button', class: 'secondary', onclick: () => load(email, res.next_cursor) },
            'More',
          )
        : '',
    );
  };
  const search = form(
    { 'aria-label': 'Find a user', class: 'inline' },
    [
      field('Email', {
        name: 'email',
        type: 'search',
        value: lastSearch,
        placeholder: 'any part of the address',
      }),
    ],
    'Find',
    async (v) => {
      lastSearch = v.email;
      await load(v.email);
    },
  );
  try {
    await load(lastSearch);
  } catch (err) {
    status.textContent = describe(err);
  }
  return page(
    'Users',
    undefined,
    adminSignIn(ctx),
    section(
      'Find a user',
      search,
      h(
        'table',
        { class: 'switches', 'aria-label': 'Users' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', {}, 'Email'),
            h('th', {}, 'State'),
            h('th', {}, 'Roles'),
            h('th', {}, 'Created'),
          ),
        ),
        rows,
      ),
      status,
      more,
    ),
  );
}

function facts(u) {
  return h(
    'dl',
    { class: 'facts' },
    h('dt', {}, 'Email'),
    h(
      'dd',
      { id: 'admin-user-email' },
      u.email ?? '—',
      ' ',
      badge(u.email_verified, 'verified', 'not verified'),
    ),
    h('dt', {}, 'User id'),
    h('dd', {}, h('code', {}, u.id)),
    h('dt', {}, 'Display name'),
    h('dd', {}, u.display_name ?? '—'),
    h('dt', {}, 'State'),
    h(
      'dd',
      { id: 'admin-user-state' },
      u.disabled ? 'Disabled' : u.active ? 'Active' : 'Waiting for activation',
    ),
    h('dt', {}, 'Roles'),
    h('dd', { id: 'admin-user-roles' }, `${u.roles.join(', ')} (default ${u.default_role})`),
    h('dt', {}, 'Two-factor'),
    h('dd', {}, badge(u.mfa_enabled, 'On', 'Off')),
    h('dt', {}, 'Providers'),
    h('dd', {}, u.providers.length ? u.providers.map((p) => p.provider).join(', ') : 'none'),
    h('dt', {}, 'Created'),
    h('dd', {}, when(u.created_at)),
  );
}

function sessionsTable(sessions) {
  if (sessions.length === 0) return h('p', { id: 'admin-user-sessions' }, 'No live session.');
  return h(
    'table',
    { class: 'switches', id: 'admin-user-sessions', 'aria-label': 'Sessions' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'Signed in'),
        h('th', {}, 'Last active'),
        h('th', {}, 'Method'),
        h('th', {}, 'Client'),
      ),
    ),
    h(
      'tbody',
      {},
      sessions.map((s) =>
        h(
          'tr',
          {},
          h('td', {}, when(s.created_at)),
          h('td', {}, when(s.last_active_at)),
          h('td', {}, s.sign_in_method ?? '—'),
          h('td', { class: 'client' }, `${s.ip ?? '—'} · ${s.user_agent ?? '—'}`),
        ),
      ),
    ),
  );
}

function feedList(events) {
  if (events.length === 0) return h('p', {}, 'Nothing yet.');
  return h(
    'ul',
    { class: 'feed' },
    events.map((e) => {
      const by = e.details?.by;
      const who = by ? ` · by ${by.via === 'admin-role' ? `admin ${by.user_id}` : by.via}` : '';
      return h('li', {}, h('code', {}, e.type), ` ${when(e.created_at)}${who}`);
    }),
  );
}

/** The files under `folder`, read with the admin secret (storage bypasses its rules for it only). */
async function filesSection(u) {
  if (!secret())
    return h(
      'p',
      {},
      'Browsing another user’s files needs the admin secret: the storage rules apply to your own session.',
    );
  const list = h('div', { id: 'admin-files' });
  const load = async (folder) => {
    try {
      const files = await adminApi('GET', storagePath('m', folder));
      list.replaceChildren(
        files.length === 0
          ? h('p', {}, `No file in ${folder}.`)
          : h(
              'ul',
              { class: 'feed' },
              files.map((f) =>
                h(
                  'li',
                  {},
                  h('code', {}, f.key),
                  ` · ${size(f.ContentLength)} · ${f.ContentType} · `,
                  h(
                    'button',
                    { type: 'button', class: 'secondary', onclick: () => download(f.key) },
                    'Download',
                  ),
                ),
              ),
            ),
      );
    } catch (err) {
      list.replaceChildren(h('p', { class: 'alert', role: 'alert' }, describe(err)));
    }
  };
  const folder = `user/${u.id}/`;
  await load(folder);
  return h(
    'div',
    {},
    form(
      { 'aria-label': 'Folder', class: 'inline' },
      [field('Folder', { name: 'folder', value: folder, required: true })],
      'Show',
      async (v) => load(v.folder.endsWith('/') ? v.folder : `${v.folder}/`),
    ),
    list,
  );
}

/** Saves a file read with the admin secret (a plain link could not carry the header). */
async function download(key) {
  const s = secret();
  const res = await fetch(storagePath('o', key), { headers: { 'x-admin-secret': s } });
  if (!res.ok) return;
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: key.slice(key.lastIndexOf('/') + 1) });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

const LINK_TYPES = [
  ['password-reset', 'Password reset'],
  ['magic-link', 'Magic link'],
  ['activation', 'Activation'],
];

function linksSection(ctx, u) {
  const out = h('div', { id: 'admin-link' });
  const select = h(
    'select',
    { id: 'admin-link-type', name: 'type' },
    LINK_TYPES.map(([v, label]) =>
      h('option', { value: v, selected: !u.active ? v === 'activation' : undefined }, label),
    ),
  );
  const make = async (send) => {
    out.replaceChildren();
    try {
      const res = await adminApi('POST', `/admin/users/${u.id}/links`, { type: select.value, send });
      const input = h('input', {
        id: 'admin-link-url',
        readonly: true,
        value: res.url,
        'aria-label': 'The link',
      });
      out.replaceChildren(
        h(
          'p',
          { class: 'done', role: 'status' },
          send
            ? `Emailed to ${u.email}; valid until ${when(res.expires_at)}.`
            : `Valid once, until ${when(res.expires_at)}. Whoever holds it gets in: hand it over on a channel you trust.`,
        ),
        send ? '' : input,
        send
          ? ''
          : h(
              'div',
              { class: 'actions compact' },
              h(
                'button',
                {
                  type: 'button',
                  class: 'secondary',
                  onclick: async () => {
                    await navigator.clipboard?.writeText(res.url).catch(() => {});
                    input.select();
                  },
                },
                'Copy',
              ),
            ),
      );
    } catch (err) {
      out.replaceChildren(h('p', { class: 'alert', role: 'alert' }, describe(err)));
    }
  };
  return section(
    'Links',
    h('div', { class: 'field' }, h('label', { for: 'admin-link-type' }, 'Kind of link'), select),
    h(
      'div',
      { class: 'actions compact' },
      h('button', { type: 'button', onclick: () => make(false) }, 'Make a link to copy'),
      ctx.settings.emails === false
        ? ''
        : h('button', { type: 'button', class: 'secondary', onclick: () => make(true) }, 'Send it by email'),
    ),
    out,
  );
}

/** One user: facts, roles, state, sessions, links, files and feed. */
export async function adminUserPage(ctx) {
  if (!adminReady(ctx) || !openUser) return adminUsersPage(ctx);
  let u;
  try {
    u = await adminApi('GET', `/admin/users/${openUser}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) openUser = undefined;
    throw err;
  }
  const notice = ctx.takeNotice();
  const change = async (body, message) => {
    await adminApi('PATCH', `/admin/users/${u.id}`, body);
    ctx.notice(message);
    ctx.render();
  };
  const roles = form(
    { 'aria-label': 'Roles' },
    [
      field(
        'Roles',
        { name: 'roles', value: u.roles.join(', '), required: true },
        'Comma-separated; each must be in auth.roles.',
      ),
      field('Default role', { name: 'default_role', value: u.default_role, required: true }),
    ],
    'Save roles',
    async (v) =>
      change(
        {
          roles: v.roles
            .split(',')
            .map((r) => r.trim())
            .filter((r) => r !== ''),
          default_role: v.default_role.trim(),
        },
        'Roles saved. A role taken away signs the user out everywhere.',
      ),
  );
  const state = h(
    'div',
    { class: 'actions compact' },
    h(
      'button',
      {
        type: 'button',
        class: u.disabled ? undefined : 'danger',
        onclick: () =>
          change(
            { disabled: !u.disabled },
            u.disabled ? 'Enabled: the user can sign in again.' : 'Disabled: every session ended at once.',
          ),
      },
      u.disabled ? 'Enable' : 'Disable',
    ),
    h(
      'button',
      {
        type: 'button',
        class: 'secondary',
        onclick: async () => {
          const res = await adminApi('POST', `/admin/users/${u.id}/sign-out`);
          ctx.notice(`Signed out everywhere: ${res.sessions_ended} session(s) ended.`);
          ctx.render();
        },
      },
      'Sign out everywhere',
    ),
  );
  const feed = await adminApi('GET', `/admin/users/${u.id}/security-events?limit=20`).catch(() => []);
  return page(
    u.email ?? u.id,
    undefined,
    notice,
    h('p', {}, h('a', { href: '#/admin' }, '← Back to the users')),
    h(
      'div',
      { class: 'columns' },
      h('div', {}, section('Account', facts(u), state), linksSection(ctx, u), section('Roles', roles)),
      h(
        'div',
        {},
        section('Sessions', sessionsTable(u.sessions)),
        section('Security feed', feedList(feed)),
        ctx.settings.storage ? section('Files', await filesSection(u)) : null,
      ),
    ),
  );
}

/** The email outbox (sent, waiting, failed) and the webhook deliveries given up. */
export async function adminEmailsPage(ctx) {
  if (!adminReady(ctx)) return adminUsersPage(ctx);
  const [emails, failed] = await Promise.all([
    adminApi('GET', '/admin/emails?limit=50'),
    adminApi('GET', '/admin/webhooks/failed?limit=50'),
  ]);
  return page(
    'Emails',
    'The durable outbox: every email the service wrote, where it stands. The messages themselves (they hold links) are not shown here.',
    section(
      'Email outbox',
      emails.length === 0
        ? h('p', {}, 'No email yet.')
        : h(
            'table',
            { class: 'switches', id: 'admin-emails', 'aria-label': 'Emails' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, 'To'),
                h('th', {}, 'Template'),
                h('th', {}, 'State'),
                h('th', {}, 'Written'),
                h('th', {}, 'Last error'),
              ),
            ),
            h(
              'tbody',
              {},
              emails.map((e) =>
                h(
                  'tr',
                  {},
                  h('td', {}, e.recipient),
                  h('td', {}, e.template),
                  h('td', {}, `${e.status}${e.attempts > 1 ? ` (${e.attempts} tries)` : ''}`),
                  h('td', {}, when(e.created_at)),
                  h('td', { class: 'error' }, e.last_error ?? '—'),
                ),
              ),
            ),
          ),
    ),
    section(
      'Webhook failures',
      failed.length === 0
        ? h(
            'p',
            {},
            'No webhook delivery has been given up (WEBHOOK_URL sends each event until it is taken).',
          )
        : h(
            'table',
            { class: 'switches', id: 'admin-webhook-failures', 'aria-label': 'Webhook failures' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, 'Event'),
                h('th', {}, 'Receiver'),
                h('th', {}, 'Given up'),
                h('th', {}, 'Attempts'),
                h('th', {}, 'Last error'),
              ),
            ),
            h(
              'tbody',
              {},
              failed.map((f) =>
                h(
                  'tr',
                  {},
                  h('td', {}, f.type ?? '—'),
                  h('td', { class: 'error' }, f.url ?? '—'),
                  h('td', {}, when(f.failed_at)),
                  h('td', {}, String(f.attempts)),
                  h('td', { class: 'error' }, f.last_error ?? '—'),
                ),
              ),
            ),
          ),
    ),
  );
}
