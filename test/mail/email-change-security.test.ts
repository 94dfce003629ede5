/**
 * Issue 15, points 2 and 6, on both email-change flows (direct with VERIFY_EMAILS=false, requested then
 * confirmed with VERIFY_EMAILS=true), with the default NOTIFY_EMAIL_CHANGE: after a change the old address
 * is told and every other session of the account ends; an address in use elsewhere is answered exactly
 * like a free one and nothing moves to it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { snapshot } from '../auth/helpers.ts';
import { dbKinds } from '../helpers/db.ts';
import { accountRow, buildMailApp, createAccount, liveTickets, type MailTestApp } from './fixtures.ts';

const PASSWORD = 'the owner password';

interface Tokens {
  jwt: string;
  refresh: string;
}

let n = 0;
const address = (what: string) => `${what}-${++n}@example.com`;

async function signIn(t: MailTestApp, email: string): Promise<Tokens> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email, password: PASSWORD, cookie: false },
  });
  assert.equal(res.statusCode, 200, res.body);
  return { jwt: res.json().jwt_token, refresh: res.json().refresh_token };
}

const refresh = (t: MailTestApp, token: string) =>
  t.app.inject({ method: 'GET', url: `/auth/token/refresh?refresh_token=${encodeURIComponent(token)}` });

/** The answer as a client sees it, without what differs between any two requests. */
function answer(res: LightMyRequestResponse) {
  const { date: _d, 'x-request-id': _r, ...headers } = res.headers;
  return { status: res.statusCode, body: res.body, headers: Object.keys(headers).sort() };
}

const FLOWS = [
  { name: 'direct', config: { VERIFY_EMAILS: false }, url: '/auth/change-email' },
  { name: 'requested', config: { VERIFY_EMAILS: true }, url: '/auth/change-email/request' },
] as const;

for (const kind of dbKinds()) {
  for (const flow of FLOWS) {
    describe(`email change (${flow.name}): notice, sessions, enumeration [${kind}]`, () => {
      let t: MailTestApp;
      before(async () => {
        t = await buildMailApp(kind, { ...flow.config, REDIRECT_URL_SUCCESS: 'http://app.test/' });
      });
      after(() => t.close());

      const owner = async (displayName = 'Olga') => {
        const email = address('owner');
        const { accountId } = await createAccount(t, { email, password: PASSWORD, displayName });
        return { email, accountId };
      };
      const ask = (jwt: string, newEmail: string) =>
        t.app.inject({
          method: 'POST',
          url: flow.url,
          headers: { authorization: `Bearer ${jwt}` },
          payload: { new_email: newEmail },
        });
      /** Asks for the change and, in the requested flow, confirms it with the emailed ticket. */
      const changeEmail = async (jwt: string, newEmail: string) => {
        const res = await ask(jwt, newEmail);
        assert.equal(res.statusCode, 204, res.body);
        if (flow.name === 'requested') {
          const ticket = t.smtp.last(newEmail).headers.get('x-ticket') as string;
          const done = await t.app.inject({
            method: 'POST',
            url: '/auth/change-email/change',
            payload: { ticket },
          });
          assert.equal(done.statusCode, 204, done.body);
        }
      };

      it('the old address is told about an email change', async () => {
        const o = await owner();
        const s = await signIn(t, o.email);
        const next = address('moved');
        await changeEmail(s.jwt, next);
        assert.equal((await accountRow(t, o.accountId))?.email, next);
        const notices = t.smtp.to(o.email);
        assert.equal(notices.length, 1);
        const notice = notices[0] as (typeof notices)[number];
        assert.equal(notice.subject, 'The email attached to your account has been changed');
        assert.match(notice.text, /Hello Olga/);
        assert.ok(notice.text.includes(next), 'names the new address');
        assert.match(notice.text, /If you did not make this change/);
        // No secret: no ticket header, no ticket or token in the links, nothing of the session.
        assert.equal(notice.headers.get('x-ticket'), undefined);
        assert.doesNotMatch(`${notice.text}${notice.html}`, /ticket=|token=/);
        assert.ok(!notice.text.includes(s.refresh) && !notice.text.includes(s.jwt));
      });

      it("an email change ends the account's other sessions", async () => {
        const o = await owner();
        const laptop = await signIn(t, o.email);
        t.clock.advance(1000);
        const phone = await signIn(t, o.email);
        await changeEmail(phone.jwt, address('moved'));
        const other = await refresh(t, laptop.refresh);
        assert.equal(other.statusCode, 401, 'the other sign-in ended');
        assert.equal(other.json().code, 'INVALID_REFRESH_TOKEN');
        assert.equal((await refresh(t, phone.refresh)).statusCode, 200, "the caller's own sign-in is kept");
      });

      it('change-email to a taken address answers as for a free one and changes nothing', async () => {
        const holder = await owner('Hanna');
        const o = await owner();
        const s = await signIn(t, o.email);

        const free = answer(await ask(s.jwt, address('free')));
        // Undo the free request's effect so that the two runs start alike.
        if (flow.name === 'direct') {
          assert.equal((await ask(s.jwt, o.email)).statusCode, 204);
        }
        const before = await snapshot(t);
        const ticketsBefore = await liveTickets(t, o.accountId, 'email-change');
        const sent = t.smtp.messages.length;

        const taken = await ask(s.jwt, holder.email.toUpperCase().replace('EXAMPLE.COM', 'example.com'));
        assert.deepEqual(answer(taken), free, 'same status, body and headers');

        // Nothing moved to the address, and no ticket could take it.
        assert.equal((await accountRow(t, o.accountId))?.email, o.email);
        assert.equal((await accountRow(t, holder.accountId))?.email, holder.email);
        assert.equal((await accountRow(t, o.accountId))?.new_email, null);
        assert.equal(await liveTickets(t, o.accountId, 'email-change'), 0);
        if (flow.name === 'direct') assert.equal(await snapshot(t), before);
        else assert.equal(ticketsBefore, 1, "the free request's ticket was live, and is now replaced");
        assert.equal((await refresh(t, s.refresh)).statusCode, 200, 'no session ended');

        // One email, as for a free address: the mailbox of the taken address learns the truth.
        assert.equal(t.smtp.messages.length, sent + 1);
        const told = t.smtp.last(holder.email);
        assert.equal(told.subject, 'Someone tried to use your email address');
        assert.match(told.text, /Hello Hanna/);
        assert.match(told.text, /nothing was changed/);
        assert.equal(told.headers.get('x-ticket'), undefined);
        assert.doesNotMatch(`${told.text}${told.html}`, /ticket=|token=/);
      });
    });
  }
}
