package ai.marqo.search;

import com.yahoo.search.Query;
import com.yahoo.search.Result;
import com.yahoo.search.Searcher;
import com.yahoo.search.searchchain.Execution;

public class HybridSearcher extends Searcher {
    @Override
    public Result search(Query query, Execution execution) {
        return execution.search(query);
    }
}
