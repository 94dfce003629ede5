-- An operator's block on an account (gatehouse users disable), kept apart from HBP's `active`, which
-- means "the address is proven": an activation link, a registration or a provider sign-in may set
-- `active`, and none of them must undo a block. NULL: not disabled.
ALTER TABLE auth.accounts ADD COLUMN IF NOT EXISTS disabled_at timestamptz;
