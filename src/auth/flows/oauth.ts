/**
 * Sign-in with OAuth and OpenID Connect providers (contract §5, with HBP's defects D11 fixed): the
 * account half. The protocols (authorization URL, code exchange, ID token, profile) live in
 * auth/oauth/identity.ts and know nothing of accounts; this module decides what an identity may do.
 *
 * - **Start** (`GET /auth/providers/<p>`): a random `state` (OAuth 1.0a: the request token), a PKCE
 *   verifier where the provider supports it and, for OpenID Connect, a `nonce` are remembered in
 *   auth.provider_requests together with the SHA-256 of a random value kept in the browser's signed
 *   cookie. Only that browser can finish the sign-in, only once, within PROVIDER_STATE_EXPIRES_IN.
 * - **Callback**: the request is used up (only by the browser that started it) before anything else,
 *   then the code is exchanged (with the verifier), an ID token is validated in full (oauth/oidc.ts) and
 *   the profile is read.
 * - **Account**: a known (provider, subject) signs in its account; a signed-in user's start links the
 *   identity to their account; an unknown identity whose email belongs to an account is linked to it
 *   only when the provider vouches for the email (otherwise PROVIDER_EMAIL_NOT_VERIFIED and nothing
 *   changes) and the account's own address was proven (otherwise PROVIDER_EMAIL_IN_USE: its owner signs
 *   in the usual way and links from there; a pending account is completed with the provider's proof
 *   and keeps nothing its registrants chose); else a new account is made, holding the email only when
 *   it is vouched for (an address nobody proved must not reserve the address, or let its real owner
 *   later share the account with whoever made it), and recorded as proven by that provider. All of it
 *   happens in one transaction with the session or the MFA ticket.
 */
import { secretsEqual } from '../../constant-time.ts';
import type { Queryable } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import { recordEvent } from '../../events/record.ts';
import type { EventClient } from '../../events/types.ts';
import { userCreated } from '../../webhooks/webhooks.ts';
import { assertEmailDomain, callerAccount } from '../accounts.ts';
import { type AccountRow, findAccountById, insertAccount, lockAccountByEmail } from '../accounts-store.ts';
import type { AuthDeps } from '../deps.ts';
import { SecretBox, SecretBoxError } from '../mfa/secret-box.ts';
import { acquireIdentity, authorizationRequest, type StoredTokens } from '../oauth/identity.ts';
import {
  accountLinks,
  deleteLink,
  deleteLinkTokens,
  findAccountByIdentity,
  findLinkTokens,
  insertLink,
  type LinkConflict,
  lockAccount,
  saveLinkTokens,
} from '../oauth/links-store.ts';
import { type Provider, type ProviderName, type ProviderProfile, subjectOf } from '../oauth/providers.ts';
import type { ProviderRegistry } from '../oauth/registry.ts';
import {
  consumeProviderRequest,
  insertProviderRequest,
  type ProviderRequest,
} from '../oauth/requests-store.ts';
import { countPasskeys } from '../passkeys/passkeys-store.ts';
import { assertReauthenticated, type Reauthentication } from '../reauth.ts';
import { sha256Hex } from '../secrets.ts';
import { issueSession, type OwnSignIn, type Session } from '../sessions.ts';
import { issueTicket } from '../tickets-store.ts';
import { chooseRoles, completeRegistration } from './registration.ts';

/** The auth dependencies plus the provider registry and the box that seals provider tokens. */
export interface OAuthDeps extends AuthDeps {
  readonly registry: ProviderRegistry;
  readonly box: SecretBox;
}

/** The URL registered with each provider as its redirect (callback) URL. */
export function callbackUrl(deps: Pick<AuthDeps, 'config'>, provider: ProviderName): string {
  return `${deps.config.SERVER_URL.replace(/\/+$/, '')}/auth/providers/${provider}/callback`;
}

export interface StartInput {
  provider: Provider;
  /** The random value of the browser's binding cookie. */
  binding: string;
  redirectTo?: string;
  useCookie: boolean;
  /** A signed-in user linking the provider to their account, with the proof of a recent sign-in. */
  link?: { userId: string; reauth: Reauthentication };
}

/** Starts a sign-in: remembers it and returns the provider URL the browser is sent to. */
export async function startProviderSignIn(deps: OAuthDeps, input: StartInput): Promise<string> {
  const { provider } = input;
  let linkAccountId: string | undefined;
  if (input.link) {
    // Linking adds a way into the account: a bearer token alone must not be enough (auth/reauth.ts).
    const account = await callerAccount(deps, input.link.userId);
    await assertReauthenticated(deps, account, input.link.reauth);
    linkAccountId = account.id;
  }
  const now = deps.clock.now();
  const pending = await authorizationRequest(deps.registry, provider, callbackUrl(deps, provider.name));
  await insertProviderRequest(deps.db, {
    provider: provider.name,
    key: pending.key,
    binding: input.binding,
    redirectTo: input.redirectTo,
    useCookie: input.useCookie,
    linkAccountId,
    codeVerifier: pending.codeVerifier,
    nonce: pending.nonce,
    requestTokenSecret: pending.requestTokenSecret,
    createdAt: now,
    expiresAt: new Date(now.getTime() + deps.config.PROVIDER_STATE_EXPIRES_IN * 60_000),
  });
  return pending.url;
}

/** The enabled provider of that name; 404 for a disabled or unknown one. */
export function enabledProvider(deps: Pick<OAuthDeps, 'registry'>, name: string): Provider {
  const p = deps.registry.get(name);
  if (!p) throw new AppError('NOT_FOUND');
  return p;
}

/** The outcome of a callback: a session, or the MFA step for an account with a second factor. */
export type ProviderOutcome =
  | { kind: 'session'; session: Session; redirectTo?: string; useCookie: boolean }
  | { kind: 'mfa'; ticket: string; redirectTo?: string; useCookie: boolean };

function stateInvalid(): AppError {
  return new AppError('PROVIDER_STATE_INVALID');
}

/**
 * Uses up the sign-in named by the callback's `state` (or OAuth 1.0a request token), when this browser
 * started it; a state from another browser is refused without being used up. A forged, unknown, reused,
 * expired or other-browser state is PROVIDER_STATE_INVALID.
 */
async function claimRequest(
  deps: OAuthDeps,
  provider: Provider,
  params: Record<string, string>,
  binding: string | undefined,
): Promise<ProviderRequest> {
  // OAuth 1.0a: the request token comes back as oauth_token, or as `denied` when the person refused.
  const key = provider.kind === 'oauth1' ? (params.oauth_token ?? params.denied) : params.state;
  if (!key || !binding) throw stateInvalid();
  const request = await consumeProviderRequest(deps.db, key, provider.name, binding, deps.clock.now());
  // The statement matched the binding already; checked again here so that the rule lives in this file.
  if (!request || !secretsEqual(request.bindingHash, sha256Hex(binding))) throw stateInvalid();
  return request;
}

/**
 * Finishes a sign-in from the provider's callback parameters (query, or Apple's form body) and the
 * browser's binding cookie.
 */
export async function finishProviderSignIn(
  deps: OAuthDeps,
  input: {
    provider: Provider;
    params: Record<string, string>;
    binding: string | undefined;
    client?: EventClient;
  },
): Promise<ProviderOutcome> {
  const { provider, params } = input;
  // Used up first, whatever the provider says next: a callback is good for one try.
  const request = await claimRequest(deps, provider, params, input.binding);
  const identity = await acquireIdentity(
    deps.registry,
    provider,
    request,
    params,
    callbackUrl(deps, provider.name),
    deps.clock.now(),
  );
  const common = { redirectTo: request.redirectTo ?? undefined, useCookie: request.useCookie };
  return deps.db.transaction(async (tx) => {
    const account = await resolveAccount(deps, tx, provider, identity.profile, request.linkAccountId);
    await keepTokens(deps, tx, account.linkId, identity.tokens);
    const client = input.client ?? null;
    if (account.linked)
      await recordEvent(deps, tx, {
        type: 'provider_linked',
        accountId: account.row.id,
        client,
        details: { provider: provider.name },
      });
    if (account.row.mfa_enabled) {
      // The provider stands for the password, not the second factor.
      const { ticket } = await issueTicket(tx, deps.config, deps.clock.now(), {
        accountId: account.row.id,
        purpose: 'mfa-login',
        keepEarlier: true,
      });
      return { kind: 'mfa', ticket, ...common };
    }
    // A new session family signed in now: a fresh sign-in for SENSITIVE_ACTION_WINDOW (auth_time).
    return {
      kind: 'session',
      session: await issueSession(deps, account.row.id, {
        db: tx,
        method: `oauth:${provider.name}`,
        client: input.client,
      }),
      ...common,
    };
  });
}

function linkConflict(conflict: LinkConflict): AppError {
  return new AppError(
    conflict === 'identity-in-use' ? 'PROVIDER_IDENTITY_IN_USE' : 'PROVIDER_ALREADY_LINKED',
  );
}

/**
 * The account an identity signs in (linking or creating it as the module comment says); `linked` when
 * the identity was just linked to an account that existed before (the owner's feed says so).
 */
async function resolveAccount(
  deps: OAuthDeps,
  tx: Queryable,
  provider: Provider,
  profile: ProviderProfile,
  linkAccountId: string | null,
): Promise<{ row: AccountRow; linkId: string; linked: boolean }> {
  const subject = subjectOf(provider, profile);
  const linked = await findAccountByIdentity(tx, provider.name, subject);
  if (linkAccountId !== null) {
    if (linked && linked.id !== linkAccountId) throw new AppError('PROVIDER_IDENTITY_IN_USE');
    let linkId = linked?.link_id;
    if (!linkId) {
      const made = await insertLink(tx, linkAccountId, provider.name, subject);
      if ('conflict' in made) throw linkConflict(made.conflict);
      linkId = made.id;
    }
    const row = await findAccountById(tx, linkAccountId);
    if (!row?.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
    return { row, linkId, linked: !linked };
  }
  if (linked) {
    if (!linked.active) throw new AppError('ACCOUNT_NOT_ACTIVATED');
    const { link_id, ...row } = linked;
    return { row, linkId: link_id, linked: false };
  }
  const existing = profile.email ? await lockAccountByEmail(tx, profile.email) : undefined;
  if (existing) {
    // HBP linked here whatever the provider knew of the address: anyone could then register the
    // victim's address at a provider that does not check it and sign in as the victim.
    if (!profile.emailVerified) throw new AppError('PROVIDER_EMAIL_NOT_VERIFIED');
    // The provider's proof is worth only as much as the account's: an active account whose address was
    // never proven may belong to whoever typed the address in (a registration with auto-activation, a
    // direct email change), and linking would sign the real owner in to that person's account.
    if (existing.active && !existing.email_verified) throw new AppError('PROVIDER_EMAIL_IN_USE');
    const made = await insertLink(tx, existing.id, provider.name, subject);
    if ('conflict' in made) throw linkConflict(made.conflict);
    // A pending registration: the provider proved the address as the emailed link would have, and
    // like a link with rivals it keeps nothing an unproven request chose (auth/registration.ts).
    if (!existing.active)
      await completeRegistration(
        deps,
        tx,
        { accountId: existing.id, payload: {} },
        `provider:${provider.name}`,
      );
    return { row: (await findAccountById(tx, existing.id)) as AccountRow, linkId: made.id, linked: true };
  }
  const email = profile.email && profile.emailVerified ? profile.email : null;
  if (deps.config.ALLOWED_EMAIL_DOMAINS.length > 0) {
    // Only an address the provider vouches for can show the domain.
    if (!email) throw new AppError('EMAIL_DOMAIN_NOT_ALLOWED');
    assertEmailDomain(deps, email);
  }
  const roles = chooseRoles(deps, undefined);
  const userData: Record<string, unknown> = {
    display_name: profile.displayName ?? email ?? `${provider.name} user`,
  };
  if (profile.avatarUrl) userData.avatar_url = profile.avatarUrl;
  const { accountId, userId } = await insertAccount(tx, {
    email,
    passwordHash: null,
    active: true,
    isAnonymous: false,
    defaultRole: roles.defaultRole,
    roles: roles.roles,
    userData,
    emailProof: email ? { by: `provider:${provider.name}`, at: deps.clock.now() } : undefined,
  });
  await deps.webhooks.queue(tx, userCreated(userId, email, true, { provider: provider.name }));
  const made = await insertLink(tx, accountId, provider.name, subject);
  if ('conflict' in made) throw linkConflict(made.conflict);
  return { row: (await findAccountById(tx, accountId)) as AccountRow, linkId: made.id, linked: false };
}

/** Seals the provider's tokens beside the link (PROVIDER_TOKENS_STORED), or forgets earlier ones. */
async function keepTokens(
  deps: OAuthDeps,
  tx: Queryable,
  linkId: string,
  tokens: StoredTokens,
): Promise<void> {
  if (!deps.config.PROVIDER_TOKENS_STORED) return deleteLinkTokens(tx, linkId);
  const sealed = deps.box.seal(Buffer.from(JSON.stringify(tokens), 'utf8'), tokenContext(linkId));
  const expiresAt = tokens.expires_at ? new Date(tokens.expires_at) : null;
  await saveLinkTokens(tx, linkId, sealed, expiresAt, deps.clock.now());
}

/** Associated data of sealed tokens: a sealed value copied to another link does not open there. */
const tokenContext = (linkId: string) => `provider-tokens:${linkId}`;

/** The provider tokens of the signed-in user's link to `provider`. */
export async function readProviderTokens(
  deps: OAuthDeps,
  userId: string,
  provider: string,
): Promise<StoredTokens & { provider: string }> {
  const account = await callerAccount(deps, userId);
  enabledProvider(deps, provider);
  const found = await findLinkTokens(deps.db, account.id, provider);
  if (!found) throw new AppError('PROVIDER_NOT_LINKED');
  if (found.sealed === null) throw new AppError('PROVIDER_TOKENS_NOT_STORED');
  let tokens: StoredTokens;
  try {
    tokens = JSON.parse(deps.box.open(found.sealed, tokenContext(found.linkId)).toString('utf8'));
  } catch (err) {
    // Sealed under a key that is no longer configured, or tampered with: an operator problem.
    if (err instanceof SecretBoxError) throw new AppError('INTERNAL', undefined, { cause: err });
    throw err;
  }
  return { provider, ...tokens };
}

/**
 * Unlinks `provider` from the signed-in user's account while another way to sign in remains: a
 * password, another linked provider, or magic links to the account's address. Removing a way in is a
 * sensitive change (a recent sign-in or the password).
 */
export async function unlinkProvider(
  deps: OAuthDeps,
  userId: string,
  provider: string,
  reauth: Reauthentication,
  own: OwnSignIn = {},
): Promise<void> {
  const account = await callerAccount(deps, userId);
  enabledProvider(deps, provider);
  await assertReauthenticated(deps, account, reauth);
  await deps.db.transaction(async (tx) => {
    // Two unlinks at once must not both see the other's provider as the remaining way in.
    await lockAccount(tx, account.id);
    const links = await accountLinks(tx, account.id);
    if (!links.some((l) => l.provider === provider)) throw new AppError('PROVIDER_NOT_LINKED');
    const magicLink = deps.config.MAGIC_LINK_ENABLED && account.email !== null;
    if (
      account.password_hash === null &&
      links.length < 2 &&
      !magicLink &&
      (await countPasskeys(tx, account.id)) === 0
    )
      throw new AppError('PROVIDER_LAST_SIGN_IN_METHOD');
    await deleteLink(tx, account.id, provider);
    await recordEvent(deps, tx, {
      type: 'provider_unlinked',
      accountId: account.id,
      sessionId: own.sessionId ?? null,
      client: own.client ?? null,
      details: { provider },
    });
  });
}

/** The box of provider tokens: the MFA secret box (same key, same rotation). */
export function providerTokenBox(ctx: Pick<AuthDeps, 'config'>): SecretBox {
  return SecretBox.fromConfig(ctx.config);
}
