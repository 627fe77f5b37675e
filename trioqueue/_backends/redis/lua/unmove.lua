-- Undo a BLMOVE whose caller was cancelled before it could claim what it moved:
-- ARGV[8] is the element (see put_back). Returns 1 if it was put back.
touch()
return put_back(ARGV[8]) and 1 or 0
