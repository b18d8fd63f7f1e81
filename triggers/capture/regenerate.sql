-- Runs on every install, after the generator: regenerates the function of every existing
-- capture, so that an upgrade gives them what the generator now writes (no user text in a
-- dollar quote, EXECUTE revoked from PUBLIC, the check of TG_RELID) and records their current
-- names. Only the functions are replaced; the triggers stay. A capture whose stored options
-- the generator now refuses (an expression outside what capture allows) keeps its function,
-- with EXECUTE revoked (grants.sql), and a warning says to attach it again. Options that name
-- no format, or a null one (attached from SQL before the format was recorded: json payloads
-- with the sql format's ev_types, or urlenc ones in statement mode), get json's, recorded.
do $$
declare
    cap  cdc.capture;
    opts jsonb;
begin
    for cap in select * from cdc.capture order by cap_table, cap_queue loop
        opts := case when cap.cap_options -> 'format' = 'null'::jsonb
                     then cap.cap_options - 'format' else cap.cap_options end;
        begin
            execute (select func_ddl from cdc._cap_generate(cap.cap_table::regclass, cap.cap_queue, opts));
            perform cdc._cap_record(cap.cap_table::regclass, cap.cap_queue, opts);
        exception when others then
            raise warning 'cdc: the capture of % into queue % was not regenerated: %; attach it again',
                cap.cap_table::regclass, cap.cap_queue, sqlerrm;
        end;
    end loop;
end;
$$;
