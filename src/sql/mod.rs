//! The user's SQL as text, before any connection: one lexer, statements with their
//! `:name` parameters, and what a statement's shape alone tells.

pub mod condition;
pub mod due;
pub mod lex;
pub mod shape;
pub mod statement;
pub mod tables;
