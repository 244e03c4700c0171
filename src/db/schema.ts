// Every table of the service, one module per domain. drizzle-kit reads this file to
// generate migrations (`npm run db:generate`).
export * from "../keys/schema";
export * from "../events/schema";
export * from "../metering/schema";
export * from "../gateway/schema";
export * from "../sandboxes/schema";
export * from "../agents/schema";
export * from "../skills/schema";
export * from "../endpoints/schema";
export * from "../deployments/schema";
export * from "../generation/schema";
export * from "../e2b/schema";
export * from "../sandboxes/quota-schema";
export * from "../sandboxes/node-schema";
export * from "../templates/schema";
export * from "../mcp/schema";
