/**
 * Whether a success body says the request failed: `{"success": false}`, or an `error` with neither
 * `success: true` nor an id beside it (`{"contact": {"id": …}, "error": "bounced before"}` was
 * acted on: taken for refused, a contact would be sent again at every push). `null`, `""`, `{}`,
 * `[]` say there was no error.
 */
export function saysRefused(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const record = body as Record<string, unknown>;
  if (record.success === false) return true;
  if (record.success === true || isEmpty(record.error)) return false;
  const hasId = (value: unknown) =>
    typeof value === 'object' && value !== null && !isEmpty((value as { id?: unknown }).id);
  return !hasId(record) && !Object.values(record).some(hasId);
}

const isEmpty = (value: unknown): boolean =>
  value === undefined ||
  value === null ||
  value === false ||
  value === '' ||
  (typeof value === 'object' && Object.keys(value).length === 0);
