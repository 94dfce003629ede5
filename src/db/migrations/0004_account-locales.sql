-- The language an account's emails are written in, chosen at registration (`locale`), so templates can
-- come from EMAIL_TEMPLATES_DIR/<template>/<locale>/. A table of its own keeps HBP's auth.accounts exactly
-- as Hasura clients know it. No row: the default templates.
CREATE TABLE IF NOT EXISTS auth.account_locales (
  account_id uuid PRIMARY KEY REFERENCES auth.accounts (id) ON UPDATE CASCADE ON DELETE CASCADE,
  locale text NOT NULL CHECK (locale ~ '^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$')
);
