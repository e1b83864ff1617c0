import type { Knex } from 'knex';

/** What a table says of itself in `\d+` and every BI tool's schema browser. */
export interface TableComments {
  readonly table?: string;
  readonly columns: Readonly<Record<string, string>>;
}

const quoted = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/**
 * COMMENT ON a relation (table or view) and its columns. COMMENT takes no bind parameters, so
 * the text is quoted here; names go through knex's identifier binding.
 */
export async function commentOn(
  knex: Knex,
  schema: string,
  relation: string,
  comments: TableComments,
  kind: 'table' | 'view' | 'materialized view' = 'table',
): Promise<void> {
  const name = `${schema}.${relation}`;
  if (comments.table !== undefined) {
    await knex.raw(`comment on ${kind} ?? is ${quoted(comments.table)}`, [name]);
  }
  for (const [column, text] of Object.entries(comments.columns)) {
    await knex.raw(`comment on column ??.?? is ${quoted(text)}`, [name, column]);
  }
}
