/**
 * Errors caused by the data itself (SQLSTATE classes 22 and 23: a value or a constraint; P0: a
 * trigger or function of an operator's refusing it, as PL/pgSQL's RAISE EXCEPTION does, P0001),
 * as opposed to the database being unreachable or restarting: trying the same write again cannot
 * help the first kind, and is what the second needs.
 */
export function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(2[23]|P0)[0-9A-Z]{3}$/.test(code);
}

/** A unique constraint refused the write (SQLSTATE 23505): a row with the same key is stored. */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}
