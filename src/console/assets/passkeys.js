// Passkeys in the browser: the service's options (PublicKeyCredential*OptionsJSON) go to
// navigator.credentials.create()/get(), and the credential goes back as its JSON (toJSON()). Browsers
// without the JSON helpers (before 2024) get the same conversion done here.
import { ApiError, api } from './api.js';

const toBytes = (b64url) => {
  const b64 = b64url.replace(/-/g, '+').replace(/_/g, '/');
  return Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
};
const toB64url = (buffer) =>
  btoa(String.fromCharCode(...new Uint8Array(buffer)))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

/** Whether this browser can use passkeys here (a secure context with WebAuthn). */
export function passkeysWork() {
  return window.isSecureContext && typeof window.PublicKeyCredential === 'function';
}

function creationOptions(json) {
  if (PublicKeyCredential.parseCreationOptionsFromJSON)
    return PublicKeyCredential.parseCreationOptionsFromJSON(json);
  return {
    ...json,
    challenge: toBytes(json.challenge),
    user: { ...json.user, id: toBytes(json.user.id) },
    excludeCredentials: (json.excludeCredentials ?? []).map((c) => ({ ...c, id: toBytes(c.id) })),
  };
}

function requestOptions(json) {
  if (PublicKeyCredential.parseRequestOptionsFromJSON)
    return PublicKeyCredential.parseRequestOptionsFromJSON(json);
  return {
    ...json,
    challenge: toBytes(json.challenge),
    allowCredentials: (json.allowCredentials ?? []).map((c) => ({ ...c, id: toBytes(c.id) })),
  };
}

function credentialJson(cred) {
  if (typeof cred.toJSON === 'function') return cred.toJSON();
  const r = cred.response;
  const response = { clientDataJSON: toB64url(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = toB64url(r.attestationObject);
    response.transports = r.getTransports?.() ?? [];
  } else {
    response.authenticatorData = toB64url(r.authenticatorData);
    response.signature = toB64url(r.signature);
    if (r.userHandle) response.userHandle = toB64url(r.userHandle);
  }
  return { id: cred.id, rawId: toB64url(cred.rawId), type: cred.type, response, clientExtensionResults: {} };
}

/** Runs a creation ceremony with `options` (from a …/options route); resolves with the credential JSON. */
export async function createPasskey(options) {
  const cred = await navigator.credentials.create({ publicKey: creationOptions(options) });
  return credentialJson(cred);
}

/** Runs a sign-in ceremony with `options`; resolves with the credential JSON. */
export async function getPasskey(options) {
  const cred = await navigator.credentials.get({ publicKey: requestOptions(options) });
  return credentialJson(cred);
}

/** Sign in: a session answer, or `{mfa, ticket}` for an account with TOTP when the user was not verified. */
export async function passkeySignIn() {
  const { options } = await api('POST', '/auth/passkeys/login/options', {});
  return api('POST', '/auth/passkeys/login/verify', { credential: await getPasskey(options), cookie: true });
}

/** Sign up: a session (auto-activation) or `{user}` (an activation link was emailed). */
export async function passkeySignUp(email) {
  const { options } = await api('POST', '/auth/passkeys/signup/options', { email });
  return api('POST', '/auth/passkeys/signup/verify', {
    credential: await createPasskey(options),
    cookie: true,
  });
}

/** Adds a passkey to the signed-in account (`password`: the sensitive-change proof, when needed). */
export async function addPasskey(name, password) {
  const { options } = await api('POST', '/auth/passkeys/register/options', password ? { password } : {});
  const credential = await createPasskey(options);
  return api('POST', '/auth/passkeys/register/verify', { credential, ...(name ? { name } : {}) });
}

/**
 * Runs `action` (a sensitive change); when the service asks for a recent sign-in, confirms with a passkey
 * first (a step-up: the session's access-token cookie is renewed with `auth_time` now) and runs it again.
 */
export async function withPasskeyStepUp(action) {
  try {
    return await action();
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 'REAUTHENTICATION_REQUIRED')) throw err;
    const { options } = await api('POST', '/auth/passkeys/reauthenticate/options', {});
    await api('POST', '/auth/passkeys/reauthenticate/verify', { credential: await getPasskey(options) });
    return action();
  }
}
