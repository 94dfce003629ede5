// The console's pages, except files (files.js). Each returns the page's content; main.js places it.
import { api, me, refresh, session, signedIn, signOut } from './api.js';
import { describe, field, form, h, narrowSection, section } from './dom.js';
import { addPasskey, passkeySignIn, passkeySignUp, passkeysWork, withPasskeyStepUp } from './passkeys.js';

function page(title, intro, ...content) {
  return h(
    'div',
    { class: 'page' },
    h('h1', { tabindex: '-1' }, title),
    intro ? h('p', { class: 'intro' }, intro) : null,
    ...content,
  );
}

function outboxHint(ctx) {
  return ctx.settings.outbox ? ' It is in the Outbox.' : '';
}

/** Signed out: sign in, create an account, lost password, activation again. */
export function signInPage(ctx) {
  const s = ctx.settings;
  const notice = ctx.takeNotice();
  const signInForm = form(
    { 'aria-label': 'Sign in' },
    [
      field('Email', { name: 'email', type: 'email', autocomplete: 'username', required: true }),
      field(
        'Password',
        { name: 'password', type: 'password', autocomplete: 'current-password', required: !s.magicLink },
        s.magicLink ? 'Leave it empty and choose “Email me a link” to sign in by email.' : undefined,
      ),
    ],
    'Sign in',
    async (v, _form, submitter) => {
      if (submitter?.value === 'magic' || (s.magicLink && v.password === '')) {
        await api('POST', '/auth/login', { email: v.email, cookie: true });
        return `If ${v.email} has an account, a sign-in link was emailed to it.${outboxHint(ctx)}`;
      }
      const body = signedIn(
        await api('POST', '/auth/login', { email: v.email, password: v.password, cookie: true }),
      );
      if (body.mfa) {
        ctx.pending.mfaTicket = body.ticket;
        ctx.go('mfa');
        return;
      }
      ctx.notice('Signed in.');
      ctx.go('session');
    },
    s.magicLink
      ? [h('button', { type: 'submit', name: 'via', value: 'magic', class: 'secondary' }, 'Email me a link')]
      : [],
  );

  const register = s.register
    ? section(
        'Create an account',
        form(
          { 'aria-label': 'Create an account' },
          [
            field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true }),
            field('Password', {
              name: 'password',
              type: 'password',
              autocomplete: 'new-password',
              required: true,
            }),
          ],
          'Sign up',
          async (v) => {
            const body = await api('POST', '/auth/register', {
              email: v.email,
              password: v.password,
              cookie: true,
            });
            if (body.jwt_token) {
              signedIn(body);
              ctx.notice('Account created; you are signed in.');
              ctx.go('session');
              return;
            }
            return `Account created. Follow the activation link emailed to ${v.email}.${outboxHint(ctx)}`;
          },
        ),
      )
    : null;

  const passkeys = s.passkeys ? passkeySections(ctx) : null;

  const lost = s.lostPassword
    ? section(
        'Forgot your password?',
        form(
          { 'aria-label': 'Forgot your password?' },
          [field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true })],
          'Email me a reset link',
          async (v) => {
            await api('POST', '/auth/change-password/request', { email: v.email });
            return `If ${v.email} has an account, a reset link was emailed to it.${outboxHint(ctx)}`;
          },
        ),
      )
    : null;

  const resend = !s.autoActivate
    ? section(
        'Activation link lost?',
        form(
          { 'aria-label': 'Send the activation link again' },
          [field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true })],
          'Send it again',
          async (v) => {
            await api('POST', '/auth/activate/resend', { email: v.email });
            return `If ${v.email} awaits activation, a new link was emailed to it.${outboxHint(ctx)}`;
          },
        ),
      )
    : null;

  return page(
    'Sign in',
    session() ? `You are signed in as ${session().user.email ?? session().user.id}.` : undefined,
    notice,
    offHere(s),
    h('div', { class: 'columns' }, section('Sign in', signInForm), register),
    passkeys,
    h('div', { class: 'columns' }, lost, resend),
  );
}

/** What the service's answer to a passkey sign-in or sign-up means for the page. */
function afterPasskey(ctx, body, email) {
  if (body.mfa) {
    ctx.pending.mfaTicket = body.ticket;
    ctx.go('mfa');
    return undefined;
  }
  if (body.jwt_token) {
    signedIn(body);
    ctx.notice(email ? 'Account created with a passkey; you are signed in.' : 'Signed in with a passkey.');
    ctx.go('session');
    return undefined;
  }
  return `Account created. Follow the activation link emailed to ${email}; then sign in with your passkey.${outboxHint(ctx)}`;
}

/** Signed out: sign in with a passkey (no address asked), or create an account whose key is a passkey. */
function passkeySections(ctx) {
  if (!passkeysWork())
    return section(
      'Passkeys',
      h('p', {}, 'This browser cannot use passkeys here (it needs HTTPS or localhost).'),
    );
  const signInWithPasskey = form(
    { 'aria-label': 'Sign in with a passkey' },
    [h('p', {}, 'Your browser offers the passkeys it holds for this site; no address needed.')],
    'Sign in with a passkey',
    async () => afterPasskey(ctx, await passkeySignIn()),
  );
  const signUpWithPasskey = ctx.settings.register
    ? form(
        { 'aria-label': 'Sign up with a passkey' },
        [field('Email', { name: 'email', type: 'email', autocomplete: 'email', required: true })],
        'Sign up with a passkey',
        async (v) => afterPasskey(ctx, await passkeySignUp(v.email), v.email),
      )
    : null;
  return h(
    'div',
    { class: 'columns' },
    section('Sign in with a passkey', signInWithPasskey),
    signUpWithPasskey ? section('Sign up with a passkey', signUpWithPasskey) : null,
  );
}

/** The email flows a person looks for on this page, named when they are off, with where to turn them on. */
function offHere(s) {
  const off = (s.flows ?? []).filter(
    (f) => !f.on && ['Activation emails', 'Lost password', 'Magic links'].includes(f.flow),
  );
  if (off.length === 0) return null;
  return h(
    'p',
    { class: 'notice off-here' },
    `Off here: ${off.map((f) => f.flow.toLowerCase()).join(', ')}. `,
    h('a', { href: '#/switches' }, 'What is switched on'),
    ' gives the setting that turns each on.',
  );
}

/** The second step of a sign-in to an account with MFA. */
export function mfaPage(ctx) {
  const ticket = ctx.pending.mfaTicket;
  if (!ticket)
    return page(
      'Two-factor code',
      'Start by signing in with your password.',
      h('p', {}, h('a', { href: '#/sign-in' }, 'Sign in')),
    );
  return page(
    'Two-factor code',
    'Enter the six-digit code your authenticator app shows for this account.',
    narrowSection(
      'Code',
      form(
        { 'aria-label': 'Two-factor code' },
        [
          field('Code', {
            name: 'code',
            inputmode: 'numeric',
            autocomplete: 'one-time-code',
            pattern: '[0-9]{6}',
            maxlength: '6',
            required: true,
            'data-autofocus': 'true',
          }),
        ],
        'Continue',
        async (v) => {
          signedIn(await api('POST', '/auth/mfa/totp', { ticket, code: v.code, cookie: true }));
          delete ctx.pending.mfaTicket;
          ctx.notice('Signed in with two factors.');
          ctx.go('session');
        },
      ),
    ),
  );
}

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : '—';
}

/** The session: who, until when, the decoded claims. */
export function sessionPage(ctx) {
  const s = session();
  const notice = ctx.takeNotice();
  if (!s)
    return page(
      'Session',
      'Nobody is signed in.',
      notice,
      h('p', {}, h('a', { href: '#/sign-in' }, 'Sign in')),
    );
  const { user, claims } = s;
  const claimsText = JSON.stringify(claims, null, 2);
  return page(
    'Session',
    undefined,
    notice,
    h(
      'div',
      { class: 'columns' },
      section(
        'Signed in',
        h(
          'dl',
          { class: 'facts' },
          h('dt', {}, 'Email'),
          h('dd', { id: 'session-email' }, user.email ?? '—'),
          h('dt', {}, 'User id'),
          h('dd', {}, h('code', {}, user.id)),
          h('dt', {}, 'Display name'),
          h('dd', {}, user.display_name ?? '—'),
          h('dt', {}, 'Signed in at'),
          h('dd', {}, when(claims.auth_time)),
          h('dt', {}, 'Token issued'),
          h('dd', {}, when(claims.iat)),
          h('dt', {}, 'Token expires'),
          h('dd', {}, when(claims.exp)),
        ),
        h(
          'div',
          { class: 'actions compact' },
          h(
            'button',
            {
              type: 'button',
              onclick: async () => {
                await refresh();
                ctx.notice('A new access token was issued.');
                ctx.render();
              },
            },
            'Refresh',
          ),
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              onclick: async () => {
                await signOut();
                ctx.notice('Signed out.');
                ctx.go('sign-in');
              },
            },
            'Sign out',
          ),
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              onclick: async () => {
                await signOut(true);
                ctx.notice('Signed out on every device.');
                ctx.go('sign-in');
              },
            },
            'Sign out everywhere',
          ),
        ),
      ),
      section(
        'Access token claims',
        h('pre', { class: 'claims', tabindex: '0', 'aria-label': 'Decoded claims' }, claimsText),
      ),
    ),
  );
}

const passwordField = (
  label = 'Current password',
  hint = 'Needed unless you signed in within the last few minutes.',
) => field(label, { name: 'password', type: 'password', autocomplete: 'current-password' }, hint);

const codeField = (extra = {}) =>
  field('Code from the app', {
    name: 'code',
    inputmode: 'numeric',
    autocomplete: 'one-time-code',
    pattern: '[0-9]{6}',
    maxlength: '6',
    required: true,
    ...extra,
  });

/**
 * The two-factor part of the Security page, as the service says it is for this account: off, a set-up
 * form (a new secret, then a code to confirm it); on, the way to turn it off. Each change redraws it.
 */
async function mfaSection() {
  const box = h('div', { class: 'mfa-state' });
  const draw = (on, message) => {
    const status = h('p', { class: 'done', role: 'status' }, message ?? '');
    if (on) {
      box.replaceChildren(
        h('p', { class: 'state' }, h('span', { class: 'badge on' }, 'On'), ' Two-factor sign-in is on.'),
        status,
        h('p', {}, 'Every password sign-in asks for a code from your authenticator app.'),
        form(
          { 'aria-label': 'Turn two-factor sign-in off' },
          [codeField(), passwordField()],
          'Turn off',
          async (v) => {
            await api('POST', '/auth/mfa/disable', {
              code: v.code,
              ...(v.password ? { password: v.password } : {}),
            });
            draw(false, 'Two-factor sign-in is off.');
            box.querySelector('button')?.focus();
          },
        ),
      );
      return;
    }
    const enrol = h('div', { class: 'enrol' });
    box.replaceChildren(
      h('p', { class: 'state' }, h('span', { class: 'badge off' }, 'Off'), ' Two-factor sign-in is off.'),
      status,
      h(
        'p',
        {},
        'Turn on codes from an authenticator app (TOTP) as a second step of every password sign-in.',
      ),
      form({ 'aria-label': 'Set up two-factor sign-in' }, [passwordField()], 'Set up', async (v) => {
        const body = await api('POST', '/auth/mfa/generate', v.password ? { password: v.password } : {});
        enrol.replaceChildren(
          h('img', {
            src: body.image_url,
            alt: 'QR code to scan with an authenticator app',
            width: 180,
            height: 180,
          }),
          h(
            'div',
            {},
            h('p', {}, 'Scan the QR code, or type this secret into the app:'),
            h('p', {}, h('code', { id: 'otp-secret', class: 'secret' }, body.otp_secret)),
            form({ 'aria-label': 'Confirm two-factor sign-in' }, [codeField()], 'Turn on', async (c) => {
              await api('POST', '/auth/mfa/enable', {
                code: c.code,
                ...(v.password ? { password: v.password } : {}),
              });
              draw(true, 'Two-factor sign-in is now on.');
              box.querySelector('input')?.focus();
            }),
          ),
        );
        enrol.querySelector('input')?.focus();
      }),
      enrol,
    );
  };
  draw((await me()).mfa);
  return box;
}

/** The account's passkeys (name, when made and last used), each removable, and "Add a passkey". */
async function passkeysSection() {
  const box = h('div', { class: 'passkeys' });
  const draw = async (message) => {
    const list = await api('GET', '/auth/passkeys');
    const status = h('p', { class: 'done', role: 'status' }, message ?? '');
    const alert = h('p', { class: 'alert', role: 'alert' });
    const rows = list.map((p) =>
      h(
        'li',
        { class: 'passkey' },
        h('strong', {}, p.name),
        h(
          'span',
          {},
          `added ${new Date(p.created_at).toLocaleDateString('en-GB')}`,
          p.last_used_at
            ? ` · last used ${new Date(p.last_used_at).toLocaleDateString('en-GB')}`
            : ' · never used',
          p.backed_up ? ' · synced' : '',
        ),
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'aria-label': `Remove the passkey ${p.name}`,
            onclick: async () => {
              alert.textContent = '';
              try {
                // A sensitive change: without a recent sign-in, one of the passkeys confirms it is you.
                await withPasskeyStepUp(() => api('DELETE', `/auth/passkeys/${p.id}`));
                await draw(`The passkey ${p.name} was removed. Remove it from your device too.`);
              } catch (err) {
                alert.textContent = describe(err);
              }
            },
          },
          'Remove',
        ),
      ),
    );
    box.replaceChildren(
      list.length === 0
        ? h(
            'p',
            {},
            'No passkey yet. A passkey signs you in with your device’s lock (fingerprint, face, PIN).',
          )
        : h('ul', { class: 'passkey-list', 'aria-label': 'Your passkeys' }, ...rows),
      status,
      alert,
      passkeysWork()
        ? form(
            { 'aria-label': 'Add a passkey' },
            [
              field('Name', { name: 'name', maxlength: '100', placeholder: 'Laptop' }),
              passwordField(
                'Current password',
                list.length > 0
                  ? 'Leave it empty to confirm with one of your passkeys when the service asks.'
                  : undefined,
              ),
            ],
            'Add a passkey',
            async (v) => {
              // Without a password, a passkey the account already has confirms it is you when needed.
              const added =
                v.password || list.length === 0
                  ? await addPasskey(v.name, v.password)
                  : await withPasskeyStepUp(() => addPasskey(v.name));
              await draw(`The passkey ${added.name} was added.`);
            },
          )
        : h('p', {}, 'This browser cannot make passkeys here (it needs HTTPS or localhost).'),
    );
  };
  await draw();
  return box;
}

/** MFA, passkeys, password and email changes. */
export async function securityPage(ctx) {
  const s = ctx.settings;
  if (!session())
    return page('Security', 'Sign in first.', h('p', {}, h('a', { href: '#/sign-in' }, 'Sign in')));

  const mfa = s.mfa ? section('Two-factor sign-in', await mfaSection()) : null;
  const passkeys = s.passkeys ? section('Passkeys', await passkeysSection()) : null;

  const password = section(
    'Change password',
    form(
      { 'aria-label': 'Change password' },
      [
        field('Current password', {
          name: 'old_password',
          type: 'password',
          autocomplete: 'current-password',
          required: true,
        }),
        field('New password', {
          name: 'new_password',
          type: 'password',
          autocomplete: 'new-password',
          required: true,
        }),
      ],
      'Change password',
      async (v, el) => {
        await api('POST', '/auth/change-password', v);
        el.reset();
        return 'Password changed. Other sessions were signed out.';
      },
    ),
  );

  const email = s.changeEmail
    ? section(
        'Change email',
        form(
          { 'aria-label': 'Change email' },
          [
            field('New email', { name: 'new_email', type: 'email', autocomplete: 'email', required: true }),
            passwordField(),
          ],
          s.verifyEmails ? 'Send a confirmation link' : 'Change email',
          async (v) => {
            const body = { new_email: v.new_email, ...(v.password ? { password: v.password } : {}) };
            if (s.verifyEmails) {
              await api('POST', '/auth/change-email/request', body);
              return `A confirmation link was emailed to ${v.new_email}.${outboxHint(ctx)}`;
            }
            await api('POST', '/auth/change-email', body);
            await refresh();
            return `Your email is now ${v.new_email}.`;
          },
        ),
      )
    : null;

  return page(
    'Security',
    undefined,
    h('div', { class: 'columns' }, h('div', {}, passkeys, mfa), h('div', {}, password, email)),
  );
}

/** Landing page of an emailed password-reset link. */
export function resetPage(ctx) {
  const ticket = ctx.pending.resetTicket;
  if (!ticket) return page('Reset password', 'Open the link of a reset email to get here.');
  return page(
    'Choose a new password',
    'This page completes the password reset link you followed.',
    narrowSection(
      'New password',
      form(
        { 'aria-label': 'Choose a new password' },
        [
          field('New password', {
            name: 'new_password',
            type: 'password',
            autocomplete: 'new-password',
            required: true,
          }),
        ],
        'Set password',
        async (v) => {
          await api('POST', '/auth/change-password/change', { ticket, new_password: v.new_password });
          delete ctx.pending.resetTicket;
          await refresh();
          ctx.notice(
            'Your password was changed and every session signed out. Sign in with the new password.',
          );
          ctx.go('sign-in');
        },
      ),
    ),
  );
}

/** Landing page of an emailed email-change link. */
export function emailChangePage(ctx) {
  const ticket = ctx.pending.emailTicket;
  if (!ticket) return page('Confirm new email', 'Open the link of an email-change message to get here.');
  return page(
    'Confirm new email',
    'This page completes the email change link you followed.',
    narrowSection(
      'Confirm',
      form({ 'aria-label': 'Confirm the new email' }, [], 'Confirm the new address', async () => {
        await api('POST', '/auth/change-email/change', { ticket });
        delete ctx.pending.emailTicket;
        if (session()) await refresh();
        return 'The new address is confirmed; sign in with it from now on.';
      }),
    ),
  );
}

/** The development outbox: every email the service wrote, newest first, with its link. */
export async function outboxPage(ctx) {
  if (!ctx.settings.outbox)
    return page(
      'Outbox',
      'Emails go out by SMTP here (or are off), so there is no development outbox to show.',
    );
  const list = h('div', { class: 'messages' });
  const load = async () => {
    try {
      const { messages } = await api('GET', '/console/api/outbox');
      if (messages.length === 0) {
        list.replaceChildren(h('p', {}, 'No email yet.'));
        return;
      }
      list.replaceChildren(
        ...messages.map((m) =>
          h(
            'article',
            { class: 'message card', 'aria-labelledby': `m-${m.id}` },
            h('h2', { id: `m-${m.id}` }, m.subject),
            h('p', { class: 'meta' }, `To ${m.to} · ${new Date(m.date).toLocaleString()} · ${m.template}`),
            /^https?:\/\//i.test(m.link ?? '')
              ? h('p', {}, h('a', { class: 'button', href: m.link }, linkLabel(m.template)))
              : null,
            h('details', {}, h('summary', {}, 'Full text'), h('pre', {}, m.text)),
          ),
        ),
      );
    } catch (err) {
      list.replaceChildren(h('p', { class: 'alert', role: 'alert' }, describe(err)));
    }
  };
  await load();
  return page(
    'Outbox',
    'Outside production, with no SMTP server set, emails are written to DATA_DIR/outbox. Their links land on this console.',
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'button', class: 'secondary', onclick: load }, 'Reload'),
    ),
    list,
  );
}

function linkLabel(template) {
  return (
    {
      'activate-account': 'Activate the account',
      'lost-password': 'Reset the password',
      'change-email': 'Confirm the new email',
      'magic-link': 'Sign in with the link',
      'notify-email-change': 'Open the application',
      'email-in-use': 'Open the application',
      'account-exists': 'Sign in',
      'new-sign-in': 'Open the application',
    }[template] ?? 'Open the link'
  );
}

/** A table of switches: the flow, on or off, and the setting that turns it on. */
function switchTable(label, rows) {
  return h(
    'table',
    { class: 'switches', 'aria-label': label },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, 'Flow'),
        h('th', { scope: 'col' }, 'State'),
        h('th', { scope: 'col' }, 'Turned on by'),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((f) =>
        h(
          'tr',
          { class: f.on ? 'on' : 'off' },
          h('th', { scope: 'row' }, f.flow, h('span', { class: 'about' }, f.about)),
          h('td', {}, h('span', { class: `badge ${f.on ? 'on' : 'off'}` }, f.on ? 'On' : 'Off')),
          h(
            'td',
            {},
            h('code', {}, f.turnOn),
            !f.on && f.needs.length > 0
              ? h(
                  'span',
                  { class: 'about' },
                  'with ',
                  f.needs.flatMap((n, i) => [i ? ', ' : '', h('code', {}, n)]),
                )
              : null,
          ),
        ),
      ),
    ),
  );
}

/** Which flows the settings switch on, and the setting (and value) that turns on each one that is off. */
export function switchesPage(ctx) {
  const { flows = [], providers = [] } = ctx.settings;
  const off = flows.filter((f) => !f.on).length;
  return page(
    'What is switched on',
    `${off} of ${flows.length} flows are off. Settings are read at start, from the environment or a .env file in the folder the service starts in: set one and restart the service.`,
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'flows-h' },
      h('h2', { id: 'flows-h' }, 'Flows'),
      switchTable('Flows', flows),
    ),
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'providers-h' },
      h('h2', { id: 'providers-h' }, 'Sign-in providers'),
      switchTable('Sign-in providers', providers),
    ),
  );
}
