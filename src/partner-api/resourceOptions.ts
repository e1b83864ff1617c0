/** The tunables every resource module of the partner API receives beside the transport. */
export interface ResourceOptions {
  /** Records per page (1–100). */
  readonly pageSize: number;
  /** Pages one walk may follow before it fails as a runaway feed. */
  readonly maxPagesPerWalk: number;
}
