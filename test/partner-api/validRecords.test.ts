import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ApiSchemaError } from '../../src/partner-api/errors.js';
import { splitValid } from '../../src/partner-api/validRecords.js';

const schema = z.object({ id: z.string(), rating: z.number().max(5) });
const where = { route: 'GET /reviews', status: 200, field: 'reviews' };

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
    );
    expect(valid.map((r) => r.id)).toEqual(['a', 'c']);
    expect(rejected).toEqual([{ raw: { id: 'b', rating: 7 }, reason: expect.stringMatching(/^rating: /) }]);
  });

  it('quarantines a lone bad record even on a page of one', () => {
    expect(splitValid([{ rating: 1 }], schema, where).rejected).toHaveLength(1);
  });

  it('refuses a page where most records fail, and at least two do: that is a format change', () => {
    expect(() => splitValid([{ id: 1 }, { id: 2 }, { id: 'c', rating: 1 }], schema, where)).toThrow(
      ApiSchemaError,
    );
    // Exactly half is not most.
    expect(
      splitValid([{ id: 1 }, { id: 2 }, { id: 'c', rating: 1 }, { id: 'd', rating: 2 }], schema, where)
        .rejected,
    ).toHaveLength(2);
  });
});
