/** The validated request bodies as the types `@simplewebauthn/server` reads. */
import type {
  AuthenticationResponseJSON,
  AuthenticatorTransport,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { AuthenticationCredentialJSON, RegistrationCredentialJSON } from './schemas.ts';

export function registrationResponse(c: RegistrationCredentialJSON): RegistrationResponseJSON {
  return {
    id: c.id,
    rawId: c.rawId,
    type: c.type,
    clientExtensionResults: {},
    response: {
      clientDataJSON: c.response.clientDataJSON,
      attestationObject: c.response.attestationObject,
      transports: c.response.transports as AuthenticatorTransport[] | undefined,
    },
  };
}

export function authenticationResponse(c: AuthenticationCredentialJSON): AuthenticationResponseJSON {
  return {
    id: c.id,
    rawId: c.rawId,
    type: c.type,
    clientExtensionResults: {},
    response: {
      clientDataJSON: c.response.clientDataJSON,
      authenticatorData: c.response.authenticatorData,
      signature: c.response.signature,
      ...(typeof c.response.userHandle === 'string' ? { userHandle: c.response.userHandle } : {}),
    },
  };
}
