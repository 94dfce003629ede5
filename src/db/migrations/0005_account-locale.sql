-- The language an account's emails are written in, chosen at registration (`locale`), so templates can
-- come from EMAIL_TEMPLATES_DIR/<template>/<locale>/. NULL means the default templates.
ALTER TABLE auth.accounts ADD COLUMN IF NOT EXISTS locale text;
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'accounts_locale_check' AND conrelid = 'auth.accounts'::regclass) THEN
    ALTER TABLE auth.accounts ADD CONSTRAINT accounts_locale_check
      CHECK (locale ~ '^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$');
  END IF;
END;
$$;
