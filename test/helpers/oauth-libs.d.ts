// passport-http-oauth and oauthorize ship no types; the test peer uses them as plain objects.
declare module 'passport-http-oauth' {
  export const ConsumerStrategy: new (...args: unknown[]) => object;
  export const TokenStrategy: new (...args: unknown[]) => object;
}
declare module 'oauthorize' {
  type Middleware = (req: unknown, res: unknown, next: (err?: unknown) => void) => void;
  const oauthorize: {
    requestToken(issue: (...args: never[]) => void): Middleware;
    accessToken(verify: (...args: never[]) => void, issue: (...args: never[]) => void): Middleware;
  };
  export default oauthorize;
}
