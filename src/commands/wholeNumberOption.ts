import { InvalidArgumentError } from 'commander';

/** A whole-number option of at least `min` (and at most `max`, when given), as commander parses it. */
export function wholeNumberOption(min: number, max?: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || (max !== undefined && n > max)) {
      throw new InvalidArgumentError(
        max === undefined
          ? `must be a whole number >= ${min}`
          : `must be a whole number from ${min} to ${max}`,
      );
    }
    return n;
  };
}
