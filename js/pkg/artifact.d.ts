export declare const ARTIFACT_SHA256: string;
