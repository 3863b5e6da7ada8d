// Validates an OpenAPI document against the specification's own JSON
// Schema, with a published validator: node validate-openapi.mjs FILE
import { Validator } from "@seriousme/openapi-schema-validator";

const validator = new Validator();
const res = await validator.validate(process.argv[2]);
console.log(JSON.stringify({ valid: res.valid, version: validator.version, errors: res.errors ?? null }));
