import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ApiSchemaError } from '../../src/partner-api/errors.js';
import { splitValid } from '../../src/partner-api/validRecords.js';

const schema = z.object({ id: z.string(), rating: z.number().max(5) });
const where = { route: 'GET /reviews', status: 200, field: 'reviews' };
// The page size asked for: "most of the page" is judged against a full page.
const LIMIT = 4;

describe('splitValid', () => {
  it('keeps the valid records and names the first bad field of each rejected one', () => {
    const { valid, rejected } = splitValid(
      [
        { id: 'a', rating: 5 },
        { id: 'b', rating: 7 },
        { id: 'c', rating: 1 },
      ],
      schema,
      where,
      LIMIT,
    );
    expect(valid.map((r) => r.id)).toEqual(['a', 'c']);
    expect(rejected).toEqual([{ raw: { id: 'b', rating: 7 }, reason: expect.stringMatching(/^rating: /) }]);
  });

  it('quarantines a lone bad record even on a page of one', () => {
    expect(splitValid([{ rating: 1 }], schema, where, 1).rejected).toHaveLength(1);
  });

  it('refuses a page where most of a full page fails, and at least two records do: that is a format change', () => {
    expect(() => splitValid([{ id: 1 }, { id: 2 }, { id: 3 }], schema, where, LIMIT)).toThrow(ApiSchemaError);
    expect(() => splitValid([{ id: 1 }, { id: 2 }, { id: 'c', rating: 1 }], schema, where, 3)).toThrow(
      ApiSchemaError,
    );
    // Exactly half is not most.
    expect(
      splitValid([{ id: 1 }, { id: 2 }, { id: 'c', rating: 1 }, { id: 'd', rating: 2 }], schema, where, LIMIT)
        .rejected,
    ).toHaveLength(2);
  });

  it('quarantines two bad records of a short page: most of that page, but not of a full one', () => {
    const { valid, rejected } = splitValid(
      [{ id: 1 }, { id: 2 }, { id: 'c', rating: 1 }],
      schema,
      where,
      100,
    );
    expect(valid.map((r) => r.id)).toEqual(['c']);
    expect(rejected).toHaveLength(2);
    expect(splitValid([{ id: 1 }, { id: 2 }], schema, where, 100).rejected).toHaveLength(2);
  });
});
