// Every table of the service, one module per domain. drizzle-kit reads this file to
// generate migrations (`npm run db:generate`).
export * from "../keys/schema";
export * from "../events/schema";
